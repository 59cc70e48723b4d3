import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

describe.each(TEST_DATABASES)('settings: sources and their tokens on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t);
  });
  afterAll(async () => t?.close());

  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown, key = account.apiKey) =>
    t.request({ method, url, key, body });
  const intakeWith = (token: string, email: string) =>
    t.request({ method: 'POST', url: `/api/v1/in/${token}`, body: { entity: 'lead', fields: { email } } });

  describe('happy path', () => {
    it('creates a source with a token that takes in records under the source name', async () => {
      const created = await call('POST', '/api/v1/settings/sources', { name: 'Landing page' });
      expect(created.statusCode).toBe(201);
      const source = created.json();
      expect(source.token).toMatch(/^st_/);
      expect(source.intake_url).toBe(`http://127.0.0.1:3000/api/v1/in/${source.token}`);
      const intake = await intakeWith(source.token, 'src@b.co');
      expect(intake.statusCode).toBe(201);
      const record = await t.request({
        method: 'GET',
        url: `/api/v1/records/${intake.json().id}`,
        key: account.apiKey,
      });
      expect(record.json().source).toBe('Landing page');
      const list = await call('GET', '/api/v1/settings/sources');
      expect(list.body).not.toContain(source.token);
      const listed = list.json().sources.find((s: { id: string }) => s.id === source.id);
      expect(listed.token_prefix).toBe(source.token.slice(0, 10));
    });

    it('rotates: the new token works, the old one stops, one active token remains', async () => {
      const source = (await call('POST', '/api/v1/settings/sources', { name: 'Ads' })).json();
      const rotated = await call('POST', `/api/v1/settings/sources/${source.id}/token`);
      expect(rotated.statusCode).toBe(201);
      const { token, intake_url } = rotated.json();
      expect(intake_url).toBe(`http://127.0.0.1:3000/api/v1/in/${token}`);
      expect(token).not.toBe(source.token);
      expect((await intakeWith(source.token, 'old@b.co')).statusCode).toBe(401);
      expect((await intakeWith(token, 'new@b.co')).statusCode).toBe(201);
      const active = await t.db
        .selectFrom('source_tokens')
        .select('id')
        .where('source_id', '=', source.id)
        .where('revoked_at', 'is', null)
        .execute();
      expect(active).toHaveLength(1);
    });
  });

  describe('errors', () => {
    it('holds an account to 500 sources, also under creations at once', async () => {
      const fresh = await t.createAccount();
      await t.db
        .insertInto('sources')
        .values(
          Array.from({ length: 497 }, (_, i) => ({
            id: randomUUID(),
            account_id: fresh.id,
            name: `Form ${i}`,
          })),
        )
        .execute();
      const answers = await Promise.all(
        [0, 1, 2, 3, 4].map((i) =>
          call('POST', '/api/v1/settings/sources', { name: `Late ${i}` }, fresh.apiKey),
        ),
      );
      expect(answers.map((r) => r.statusCode).sort()).toEqual([201, 201, 201, 422, 422]);
      expect(answers.find((r) => r.statusCode === 422)!.json()).toEqual({
        error: 'validation_failed',
        details: [{ key: 'name', reason: 'too_many', message: 'at most 500 sources per account' }],
      });
      const { count } = await t.db
        .selectFrom('sources')
        .select((eb) => eb.fn.countAll<string>().as('count'))
        .where('account_id', '=', fresh.id)
        .executeTakeFirstOrThrow();
      expect(Number(count)).toBe(500);
      // A source can't be deleted (records name it), but one no longer used can be renamed.
      const late = answers.find((r) => r.statusCode === 201)!.json();
      const renamed = await t.request({
        method: 'PATCH',
        url: `/api/v1/settings/sources/${late.id}`,
        key: fresh.apiKey,
        body: { name: 'Spring fair' },
      });
      expect(renamed.json()).toMatchObject({ name: 'Spring fair' });
    });

    it('refuses a duplicate name with 409 and an unknown source with 404', async () => {
      await call('POST', '/api/v1/settings/sources', { name: 'Fair' });
      const duplicate = await call('POST', '/api/v1/settings/sources', { name: 'fair' });
      expect(duplicate.statusCode).toBe(409);
      const missing = '00000000-0000-4000-8000-000000000000';
      expect((await call('POST', `/api/v1/settings/sources/${missing}/token`)).statusCode).toBe(404);
    });

    it('refuses a name alike to another once case and surrounding blanks are ignored (409)', async () => {
      const web = (await call('POST', '/api/v1/settings/sources', { name: 'Web' })).json();
      const before = (await call('GET', '/api/v1/settings/sources?limit=500')).json().sources.length;
      // Composed and decomposed ü are one letter, as intake matches text.
      const muller = (await call('POST', '/api/v1/settings/sources', { name: 'Müller' })).json();
      for (const name of ['Web ', ' web', '\tWEB\n', 'Mu\u0308ller ', ' MÜLLER']) {
        const refused = await call('POST', '/api/v1/settings/sources', { name });
        expect(refused.statusCode, JSON.stringify(name)).toBe(409);
        expect(refused.json().error).toBe('name_taken');
      }
      expect((await call('GET', '/api/v1/settings/sources?limit=500')).json().sources).toHaveLength(
        before + 1,
      );
      const rename = (id: string, name: string) =>
        t.request({
          method: 'PATCH',
          url: `/api/v1/settings/sources/${id}`,
          key: account.apiKey,
          body: { name },
        });
      const renamed = await rename(muller.id, ' web ');
      expect(renamed.statusCode).toBe(409);
      expect(renamed.json().error).toBe('name_taken');
      // A source may take another spelling of its own name.
      expect((await rename(web.id, ' WEB ')).json().name).toBe(' WEB ');
      expect((await rename(muller.id, 'Webshop')).statusCode).toBe(200);
    });

    it('keeps sources alike only by blanks made before, each keeping its own name', async () => {
      const older = (await call('POST', '/api/v1/settings/sources', { name: 'Booth A' })).json();
      const twin = (await call('POST', '/api/v1/settings/sources', { name: 'Temporary' })).json();
      // As the old rule let it be made (case ignored, blanks not).
      await t.db.updateTable('sources').set({ name: 'Booth A ' }).where('id', '=', twin.id).execute();
      const patch = (id: string, body: object) =>
        t.request({ method: 'PATCH', url: `/api/v1/settings/sources/${id}`, key: account.apiKey, body });
      const same = await patch(twin.id, { name: 'Booth A ', rate_limit_per_minute: 30 });
      expect(same.statusCode, same.body).toBe(200);
      expect(same.json()).toMatchObject({ name: 'Booth A ', rate_limit_per_minute: 30 });
      expect((await patch(older.id, { name: 'booth a' })).statusCode).toBe(409);
    });

    it('refuses a source name of blanks only, on creation and rename', async () => {
      const before = (await call('GET', '/api/v1/settings/sources')).json().sources.length;
      for (const name of ['   ', '\t', '\r\n']) {
        const refused = await call('POST', '/api/v1/settings/sources', { name });
        expect(refused.statusCode, JSON.stringify(name)).toBe(422);
        expect(refused.json().details).toEqual([
          { key: 'name', reason: 'required', message: 'must hold a character other than blanks' },
        ]);
      }
      expect((await call('GET', '/api/v1/settings/sources')).json().sources).toHaveLength(before);
      const source = (await call('POST', '/api/v1/settings/sources', { name: ' Booth ' })).json();
      expect(source.name).toBe(' Booth ');
      const renamed = await t.request({
        method: 'PATCH',
        url: `/api/v1/settings/sources/${source.id}`,
        key: account.apiKey,
        body: { name: '  ' },
      });
      expect(renamed.statusCode).toBe(422);
      expect(renamed.json().details[0]).toMatchObject({ key: 'name', reason: 'required' });
      expect((await call('GET', `/api/v1/settings/sources/${source.id}`)).json().name).toBe(' Booth ');
    });
  });

  describe('security', () => {
    it('revokes a token on its own', async () => {
      const source = (await call('POST', '/api/v1/settings/sources', { name: 'Partner site' })).json();
      expect((await call('DELETE', `/api/v1/settings/sources/${source.id}/token`)).statusCode).toBe(204);
      expect((await intakeWith(source.token, 'gone@b.co')).statusCode).toBe(401);
    });

    it("cannot rotate or revoke another account's source", async () => {
      const other = await accountWithLeads(t);
      const theirs = (
        await call('POST', '/api/v1/settings/sources', { name: 'Theirs' }, other.apiKey)
      ).json();
      expect((await call('POST', `/api/v1/settings/sources/${theirs.id}/token`)).statusCode).toBe(404);
      expect((await call('DELETE', `/api/v1/settings/sources/${theirs.id}/token`)).statusCode).toBe(404);
      expect((await intakeWith(theirs.token, 'still@b.co')).statusCode).toBe(201);
    });
  });
});

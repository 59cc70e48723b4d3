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
    it('refuses a duplicate name with 409 and an unknown source with 404', async () => {
      await call('POST', '/api/v1/settings/sources', { name: 'Fair' });
      const duplicate = await call('POST', '/api/v1/settings/sources', { name: 'fair' });
      expect(duplicate.statusCode).toBe(409);
      const missing = '00000000-0000-4000-8000-000000000000';
      expect((await call('POST', `/api/v1/settings/sources/${missing}/token`)).statusCode).toBe(404);
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

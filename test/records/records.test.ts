import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

describe.each(TEST_DATABASES)('records, record tokens and S1 leads on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t);
  });
  afterAll(async () => t?.close());

  const create = async (fields: Record<string, unknown>, who = account) =>
    (
      await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: who.apiKey,
        body: { entity: 'lead', fields },
      })
    ).json().id as string;
  const call = (method: 'GET' | 'PATCH' | 'POST', url: string, body?: unknown, key = account.apiKey) =>
    t.request({ method, url, key, body });

  describe('happy path', () => {
    it('reads a record in the interface shape', async () => {
      const id = await create({ email: 'read@b.co', company: 'Acme' });
      const response = await call('GET', `/api/v1/records/${id}`);
      expect(response.statusCode).toBe(200);
      expect(response.json()).toMatchObject({
        id,
        entity: 'lead',
        name: 'Acme',
        fields: { email: 'read@b.co', company: 'Acme' },
        source: 'api',
        documents: [],
        crm: { pipeline: 'Sales', stage: 'New' },
      });
      expect(Date.parse(response.json().created_at)).not.toBeNaN();
    });

    it('lists records changed since a time, page by page', async () => {
      const fresh = await accountWithLeads(t);
      const since = new Date().toISOString();
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push(await create({ email: `list${i}@b.co` }, fresh));
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: any = (
          await call(
            'GET',
            `/api/v1/records?limit=2&entity=lead&updated_since=${since}${cursor ? `&cursor=${cursor}` : ''}`,
            undefined,
            fresh.apiKey,
          )
        ).json();
        expect(page.records.length).toBeLessThanOrEqual(2);
        seen.push(...page.records.map((r: { id: string }) => r.id));
        cursor = page.next_cursor;
      } while (cursor);
      expect(seen.sort()).toEqual([...ids].sort());
      const later = (
        await call('GET', `/api/v1/records?updated_since=2999-01-01T00:00:00Z`, undefined, fresh.apiKey)
      ).json();
      expect(later.records).toEqual([]);
    });

    it('patches a record whose entity definitions are no longer cached', async () => {
      const id = await create({ email: 'cold@b.co', first_name: 'Old' });
      // A cache miss inside the write's transaction: on the embedded database a look-up outside
      // that transaction would wait for ever for the one connection it holds.
      t.services.entities.invalidate(account.id);
      const response = await Promise.race([
        call('PATCH', `/api/v1/records/${id}`, { fields: { first_name: 'New' } }),
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error('no answer within 10 s')), 10_000),
        ),
      ]);
      expect(response.statusCode).toBe(200);
      expect(response.json()).toMatchObject({ updated: true, fields: ['first_name'] });
    });

    it('patches only named fields, clears with null, and writes history', async () => {
      const id = await create({ email: 'patch@b.co', first_name: 'Old', phone: '+49 30 1234567' });
      const response = await call('PATCH', `/api/v1/records/${id}`, {
        fields: { first_name: 'New', phone: null, shoe: 1 },
      });
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({
        id,
        entity: 'lead',
        updated: true,
        fields: ['first_name', 'phone'],
        documents: 0,
        warnings: [{ key: 'shoe', reason: 'unmapped' }],
      });
      const read = (await call('GET', `/api/v1/records/${id}`)).json();
      expect(read.fields).toEqual({ email: 'patch@b.co', first_name: 'New' });
      const unchanged = await call('PATCH', `/api/v1/records/${id}`, { fields: { first_name: 'New' } });
      expect(unchanged.json()).toMatchObject({ updated: false, fields: [] });
      const events = await t.db
        .selectFrom('record_events')
        .select('type')
        .where('record_id', '=', id)
        .execute();
      expect(events.filter((e) => e.type === 'lead_updated')).toHaveLength(1);
    });

    it('patches one value of a field two names give (the key’s), and warns of the other', async () => {
      const id = await create({ email: 'twice@b.co', company: 'Old' });
      const response = await call('PATCH', `/api/v1/records/${id}`, {
        fields: { Company: 'Label', company: 'Key' },
      });
      expect(response.json()).toMatchObject({
        updated: true,
        fields: ['company'],
        warnings: [expect.objectContaining({ key: 'Company', reason: 'unmapped' })],
      });
      expect((await call('GET', `/api/v1/records/${id}`)).json().fields.company).toBe('Key');
    });

    it('reads and updates a lead on S1 with its latest events', async () => {
      const id = await create({ email: 's1@b.co' });
      const patched = await call('PATCH', `/api/leads/${id}`, {
        fields: { 'First name': 'Sue' },
        note: 'called',
      });
      expect(patched.json()).toEqual({ status: 'success', lead_id: id, updated_fields: ['first_name'] });
      const lead = (await call('GET', `/api/leads/${id}`)).json();
      expect(lead).toMatchObject({
        lead_id: id,
        status_step: 'New',
        fields: { email: 's1@b.co', first_name: 'Sue' },
      });
      expect(lead.events.map((e: { type: string }) => e.type)).toEqual([
        'note_added',
        'lead_updated',
        'lead_created',
      ]);
      for (const event of lead.events) expect(event.created_at).toMatch(/\+00:00$/);
    });
  });

  describe('record tokens', () => {
    it('write only the fields they open and can do nothing else', async () => {
      const id = await create({ email: 'tok@b.co', first_name: 'T' });
      const issued = await call('POST', `/api/v1/records/${id}/tokens`, { fields: ['phone', 'first_name'] });
      expect(issued.statusCode).toBe(201);
      const { token } = issued.json();
      expect(token).toMatch(/^rt_/);
      const patched = await call(
        'PATCH',
        '/api/v1/records',
        { fields: { phone: '+1 555 123456', email: 'evil@b.co' } },
        token,
      );
      expect(patched.statusCode).toBe(200);
      expect(patched.json()).toMatchObject({
        id,
        fields: ['phone'],
        warnings: [{ key: 'email', reason: 'not_in_scope' }],
      });
      expect((await call('GET', `/api/v1/records/${id}`)).json().fields.email).toBe('tok@b.co');
      for (const [method, url] of [
        ['GET', `/api/v1/records/${id}`],
        ['GET', '/api/v1/entities'],
        ['POST', '/api/v1/notes'],
        ['POST', '/api/v1/records'],
        ['PATCH', `/api/v1/records/${id}`],
      ] as const) {
        expect(
          (await call(method, url, { body: 'x', record: id, entity: 'lead', fields: {} }, token)).statusCode,
          url,
        ).toBe(401);
      }
    });

    it('refuse unknown fields, expired tokens and unknown tokens', async () => {
      const id = await create({ email: 'exp@b.co' });
      expect((await call('POST', `/api/v1/records/${id}/tokens`, { fields: ['nope'] })).statusCode).toBe(422);
      const { token } = (await call('POST', `/api/v1/records/${id}/tokens`, { fields: ['phone'] })).json();
      await t.db
        .updateTable('record_tokens')
        .set({ expires_at: new Date(Date.now() - 1000) })
        .where('record_id', '=', id)
        .execute();
      expect(
        (await call('PATCH', '/api/v1/records', { fields: { phone: '+1 555 123456' } }, token)).statusCode,
      ).toBe(401);
      expect((await call('PATCH', '/api/v1/records', { fields: {} }, 'rt_unknown')).statusCode).toBe(401);
    });
  });

  describe('errors', () => {
    it('answers 404 for unknown and malformed ids, 422 when clearing a required field', async () => {
      expect((await call('GET', '/api/v1/records/00000000-0000-4000-8000-000000000000')).statusCode).toBe(
        404,
      );
      expect((await call('GET', '/api/v1/records/nope')).statusCode).toBe(404);
      const s1 = await call('GET', '/api/leads/00000000-0000-4000-8000-000000000000');
      expect(s1.statusCode).toBe(404);
      expect(s1.json().status).toBe('error');
      const id = await create({ email: 'req@b.co' });
      const cleared = await call('PATCH', `/api/v1/records/${id}`, { fields: { email: null } });
      expect(cleared.statusCode).toBe(422);
      expect(cleared.json().details[0]).toMatchObject({ key: 'email', reason: 'required' });
    });

    it('warns of a key a document item does not take (a misspelt field); a strict key refuses it', async () => {
      const id = await create({ email: 'doc-keys@b.co' });
      // A closed local port: the fetch fails at once, and no traffic leaves the machine.
      const documents = [{ url: 'http://127.0.0.1:9/offer.pdf', feld: 'many' }];
      const strict = (
        await call('POST', '/api/v1/settings/api-keys', { name: 'Strict docs', strict: true })
      ).json().key;
      const refused = await call(
        'PATCH',
        `/api/v1/records/${id}`,
        { fields: { phone: '+49 30 1234567' }, documents },
        strict,
      );
      expect(refused.statusCode).toBe(422);
      expect(refused.json()).toEqual({
        error: 'validation_failed',
        details: [
          { key: 'documents.0.feld', reason: 'unmapped', message: 'a document takes url, name and field' },
        ],
      });
      expect((await call('GET', `/api/v1/records/${id}`)).json().fields.phone).toBeUndefined();
      const warned = await call('PATCH', `/api/v1/records/${id}`, {
        fields: { phone: '+49 30 1234567' },
        documents,
      });
      expect(warned.statusCode, warned.body).toBe(200);
      expect(warned.json().warnings).toContainEqual({ key: 'documents.0.feld', reason: 'unmapped' });
      expect(warned.json().fields).toEqual(['phone']);
    });
  });

  describe('duplicate rule', () => {
    it('refuses with 409 a PATCH that would give two records the values of an update rule', async () => {
      const ruled = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
      const a = await create({ email: 'first@b.co' }, ruled);
      await create({ email: 'second@b.co' }, ruled);
      const response = await call(
        'PATCH',
        `/api/v1/records/${a}`,
        { fields: { email: 'SECOND@b.co' } },
        ruled.apiKey,
      );
      expect(response.statusCode).toBe(409);
      expect(response.json()).toMatchObject({ error: 'conflict', reason: 'duplicate' });
      expect((await call('GET', `/api/v1/records/${a}`, undefined, ruled.apiKey)).json().fields.email).toBe(
        'first@b.co',
      );
    });
  });

  describe('security', () => {
    it("never reads, patches or issues tokens for another account's record", async () => {
      const other = await accountWithLeads(t);
      const theirs = await create({ email: 'theirs@b.co' }, other);
      expect((await call('GET', `/api/v1/records/${theirs}`)).statusCode).toBe(404);
      expect(
        (await call('PATCH', `/api/v1/records/${theirs}`, { fields: { first_name: 'x' } })).statusCode,
      ).toBe(404);
      expect((await call('POST', `/api/v1/records/${theirs}/tokens`, { fields: ['phone'] })).statusCode).toBe(
        404,
      );
      expect((await call('GET', `/api/leads/${theirs}`)).statusCode).toBe(404);
      expect((await call('GET', '/api/v1/records?limit=500')).body).not.toContain(theirs);
    });
  });
});

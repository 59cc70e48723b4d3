import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

/** Idempotency keys on S1 (decisions §4) and the rule for a key's characters on every surface. */
describe.each(TEST_DATABASES)('S1 idempotency keys and key characters on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t, { modules: ['crm'] });
  });
  afterAll(async () => t?.close());

  /** A POST to an S1 path, with an Idempotency-Key header when `key` is given. */
  const s1Post =
    (url: string) =>
    (body: unknown, key?: string, apiKey = account.apiKey) =>
      t.request({
        method: 'POST',
        url,
        key: apiKey,
        body,
        headers: key === undefined ? {} : { 'idempotency-key': key },
      });
  const s1Lead = s1Post('/api/intake');
  const s1Bulk = s1Post('/api/leads/bulk');
  const leadsWith = async (email: string) =>
    t.db
      .selectFrom('records')
      .select(['id', 'created_at'])
      .where('account_id', '=', account.id)
      .where('email_lc', '=', email)
      .execute();

  describe('happy path', () => {
    it('POST /api/intake with an Idempotency-Key: the repeat answers the same 200 and adds no lead', async () => {
      const body = { entity: 'lead', email: 'once@s1.co', first_name: 'Once', note: 'Called back' };
      const first = await s1Lead(body, 's1-once');
      expect(first.statusCode).toBe(200);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      const again = await s1Lead(body, 's1-once');
      expect(again.statusCode).toBe(200);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.json()).toEqual(first.json());
      const rows = await leadsWith('once@s1.co');
      expect(rows).toHaveLength(1);
      // The answer's created_at is the lead's, on the first answer and on the repeat.
      expect(new Date(first.json().created_at).getTime()).toBe(rows[0]!.created_at.getTime());
      const notes = await t.db
        .selectFrom('notes')
        .select('id')
        .where('account_id', '=', account.id)
        .where('record_id', '=', rows[0]!.id)
        .execute();
      expect(notes).toHaveLength(1);
    });

    it('two concurrent S1 handovers with one key make one lead and the same answer', async () => {
      const body = { entity: 'lead', email: 'race@s1.co' };
      const answers = await Promise.all([s1Lead(body, 's1-race'), s1Lead(body, 's1-race')]);
      expect(answers.map((answer) => answer.statusCode)).toEqual([200, 200]);
      expect(answers[0]!.json()).toEqual(answers[1]!.json());
      expect(await leadsWith('race@s1.co')).toHaveLength(1);
    });

    it('without a key every S1 handover is taken in afresh, as before', async () => {
      const body = { entity: 'lead', email: 'nokey@s1.co' };
      const first = await s1Lead(body);
      const second = await s1Lead(body);
      expect(second.json().lead_id).not.toBe(first.json().lead_id);
      expect(await leadsWith('nokey@s1.co')).toHaveLength(2);
    });

    it('POST /api/leads/bulk with an Idempotency-Key: the repeat answers the same and adds no lead', async () => {
      const body = { entity: 'lead', batch: [{ email: 'b1@s1.co' }, { email: 'b2@s1.co' }] };
      const first = await s1Bulk(body, 's1-bulk');
      expect(first.statusCode).toBe(200);
      const again = await s1Bulk(body, 's1-bulk');
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.json()).toEqual(first.json());
      expect(await leadsWith('b1@s1.co')).toHaveLength(1);
      expect(await leadsWith('b2@s1.co')).toHaveLength(1);
    });

    it('the intake log records the 200 S1 answered, alone, grouped or keyed', async () => {
      const own = await accountWithLeads(t, { modules: ['crm'] });
      await s1Lead({ entity: 'lead', email: 'log1@s1.co' }, undefined, own.apiKey);
      await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          s1Lead({ entity: 'lead', email: `log-g${i}@s1.co` }, undefined, own.apiKey),
        ),
      );
      await s1Lead({ entity: 'lead', email: 'log-key@s1.co' }, 'log-key', own.apiKey);
      const entries = await t.db
        .selectFrom('intake_log')
        .select(['endpoint', 'status_code', 'outcome'])
        .where('account_id', '=', own.id)
        .execute();
      expect(entries).toHaveLength(8);
      for (const entry of entries) {
        expect(entry).toEqual({ endpoint: 's1.intake', status_code: 200, outcome: 'created' });
      }
    });

    it('a key in the body may be any printable text: letters beyond ASCII and spaces, at the ends too', async () => {
      const record = (key: string, email: string) =>
        t.request({
          method: 'POST',
          url: '/api/v1/records',
          key: account.apiKey,
          body: { entity: 'lead', fields: { email }, meta: { idempotency_key: key } },
        });
      for (const key of ['Anfrage Müller 7', 'заявка-1', '申込み 😀', ' padded ']) {
        const first = await record(key, `${key.trim().length}x@keys.co`);
        expect(first.statusCode, key).toBe(201);
        const again = await record(key, `${key.trim().length}x@keys.co`);
        expect(again.statusCode, key).toBe(201);
        expect(again.headers['idempotent-replayed'], key).toBe('true');
        expect(again.json().id).toBe(first.json().id);
      }
      // Keys are compared as given: the trimmed spelling is another key.
      const trimmed = await record('padded', 'other@keys.co');
      expect(trimmed.headers['idempotent-replayed']).toBeUndefined();
      const longest = await record('ä'.repeat(255), 'longest@keys.co');
      expect(longest.statusCode).toBe(201);
      const note = await t.request({
        method: 'POST',
        url: '/api/v1/notes',
        key: account.apiKey,
        body: { record: longest.json().id, body: 'Keyed', idempotency_key: 'Notiz für Müller' },
      });
      expect(note.statusCode).toBe(201);
    });
  });

  describe('errors', () => {
    it('the same key with another S1 body is 422 idempotency_key_reused in the S1 body', async () => {
      await s1Lead({ entity: 'lead', email: 'first@s1.co' }, 's1-reused');
      const other = await s1Lead({ entity: 'lead', email: 'second@s1.co' }, 's1-reused');
      expect(other.statusCode).toBe(422);
      expect(other.json()).toEqual({ status: 'error', message: expect.any(String) });
      expect(await leadsWith('second@s1.co')).toHaveLength(0);
    });

    it('a refused S1 handover is the key’s answer: the repeat gets the same refusal in the S1 body', async () => {
      const body = { entity: 'lead', budget: 'lots' };
      const first = await s1Lead(body, 's1-refused');
      expect(first.statusCode).toBe(422);
      expect(first.json()).toMatchObject({ status: 'error', errors: { budget: [expect.any(String)] } });
      const again = await s1Lead(body, 's1-refused');
      expect(again.statusCode).toBe(422);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.json()).toEqual(first.json());
      const bulkBody = { entity: 'lead', batch: [{ email: 'fine@s1.co' }, { email: 'broken' }] };
      const bulk = await s1Bulk(bulkBody, 's1-bulk-refused');
      expect(bulk.statusCode).toBe(422);
      const bulkAgain = await s1Bulk(bulkBody, 's1-bulk-refused');
      expect(bulkAgain.headers['idempotent-replayed']).toBe('true');
      expect(bulkAgain.json()).toEqual(bulk.json());
      expect(await leadsWith('fine@s1.co')).toHaveLength(0);
    });

    it('a key outside 1–255 printable characters is 400 on every surface, in the surface’s body', async () => {
      const s1Refused = await s1Lead({ entity: 'lead', email: 'tab@s1.co' }, 'a\tb');
      expect(s1Refused.statusCode).toBe(400);
      expect(s1Refused.json()).toEqual({ status: 'error', message: expect.any(String) });
      const bulkRefused = await s1Bulk({ entity: 'lead', batch: [{ email: 'tab2@s1.co' }] }, 'x'.repeat(256));
      expect(bulkRefused.statusCode).toBe(400);
      expect(await leadsWith('tab@s1.co')).toHaveLength(0);
      expect(await leadsWith('tab2@s1.co')).toHaveLength(0);
      const record = (key: string) =>
        t.request({
          method: 'POST',
          url: '/api/v1/records',
          key: account.apiKey,
          body: { entity: 'lead', fields: { email: 'bad-key@keys.co' }, meta: { idempotency_key: key } },
        });
      // Control, format (a zero-width joiner), private-use and line-separator characters, and 256
      // characters. (NUL and lone surrogates, which no text may hold, are refused before: 422.)
      for (const key of ['a\u0007b', 'a\u200db', 'a\ue000b', 'a\u2028b', 'ä'.repeat(256)]) {
        const refused = await record(key);
        expect(refused.statusCode, JSON.stringify(key)).toBe(400);
        expect(refused.json(), JSON.stringify(key)).toEqual({ error: 'invalid_idempotency_key' });
      }
      expect(await leadsWith('bad-key@keys.co')).toHaveLength(0);
    });

    it('an empty key is refused (1–255 characters), in the body, the header, a bulk entry and a note', async () => {
      const inBody = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: { entity: 'lead', fields: { email: 'empty-key@keys.co' }, meta: { idempotency_key: '' } },
      });
      expect(inBody.statusCode).toBe(400);
      expect(inBody.json()).toEqual({ error: 'invalid_idempotency_key' });
      const inHeader = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: { entity: 'lead', fields: { email: 'empty-key@keys.co' } },
        headers: { 'idempotency-key': '' },
      });
      expect(inHeader.statusCode).toBe(400);
      expect(inHeader.json()).toEqual({ error: 'invalid_idempotency_key' });
      const s1Refused = await s1Lead({ entity: 'lead', email: 'empty-key@keys.co' }, '');
      expect(s1Refused.statusCode).toBe(400);
      const bulk = await t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key: account.apiKey,
        body: {
          records: [
            { entity: 'lead', fields: { email: 'empty-key@keys.co' }, meta: { idempotency_key: '' } },
            { entity: 'lead', fields: { email: 'keyless@keys.co' } },
          ],
        },
      });
      expect(bulk.statusCode).toBe(200);
      expect(bulk.json().results[0]).toEqual({ error: 'invalid_idempotency_key' });
      expect(bulk.json().results[1].created).toBe(true);
      expect(await leadsWith('empty-key@keys.co')).toHaveLength(0);
      const note = await t.request({
        method: 'POST',
        url: '/api/v1/notes',
        key: account.apiKey,
        body: { email: 'keyless@keys.co', body: 'hello', idempotency_key: '' },
      });
      expect(note.statusCode).toBe(400);
      expect(note.json()).toEqual({ error: 'invalid_idempotency_key' });
    });

    it('the Idempotency-Key header takes visible ASCII and spaces only (a header has no other encoding)', async () => {
      const withHeader = (email: string, key: string) =>
        t.request({
          method: 'POST',
          url: '/api/v1/records',
          key: account.apiKey,
          body: { entity: 'lead', fields: { email } },
          headers: { 'idempotency-key': key },
        });
      const header = await withHeader('latin1@keys.co', 'key-\u00e9');
      expect(header.statusCode).toBe(400);
      expect(header.json()).toEqual({ error: 'invalid_idempotency_key' });
      const spaced = await withHeader('spaced@keys.co', 'key with spaces');
      expect(spaced.statusCode).toBe(201);
    });
  });

  describe('security', () => {
    it('a key is the account’s own: another account’s same key and body make its own lead', async () => {
      const other = await accountWithLeads(t, { modules: ['crm'] });
      const body = { entity: 'lead', email: 'shared@s1.co' };
      const mine = await s1Lead(body, 's1-shared');
      const theirs = await s1Lead(body, 's1-shared', other.apiKey);
      expect(theirs.statusCode).toBe(200);
      expect(theirs.headers['idempotent-replayed']).toBeUndefined();
      expect(theirs.json().lead_id).not.toBe(mine.json().lead_id);
    });

    it('a key revoked on another node gets 401 on the repeat, not the stored answer', async () => {
      const created = await t.request({
        method: 'POST',
        url: '/api/v1/settings/api-keys',
        key: account.apiKey,
        body: { name: 'S1 sender' },
      });
      expect(created.statusCode).toBe(201);
      const { id: keyId, key: apiKey } = created.json();
      const body = { entity: 'lead', email: 'revoked@s1.co' };
      const first = await s1Lead(body, 's1-revoked', apiKey);
      expect(first.statusCode).toBe(200);
      // Revoked in the database only, as another node would: this node still remembers the key.
      await sql`UPDATE api_keys SET revoked_at = now() WHERE account_id = ${account.id} AND id = ${keyId}`.execute(
        t.db,
      );
      const again = await s1Lead(body, 's1-revoked', apiKey);
      expect(again.statusCode).toBe(401);
      expect(again.json().status).toBe('error');
    });

    it('keys are scoped to the endpoint: S1 and S2 may use the same key', async () => {
      const s1 = await s1Lead({ entity: 'lead', email: 'scope1@s1.co' }, 'scoped-key');
      const s2 = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: { entity: 'lead', fields: { email: 'scope2@s1.co' } },
        headers: { 'idempotency-key': 'scoped-key' },
      });
      expect(s1.statusCode).toBe(200);
      expect(s2.statusCode).toBe(201);
      expect(s2.json().id).not.toBe(s1.json().lead_id);
    });
  });
});

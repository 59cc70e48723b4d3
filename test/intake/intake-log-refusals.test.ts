import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { createSource, FORM } from '../web-forms/support.ts';

/**
 * Every intake call is logged (decisions §10), also one the edge refuses before a lead is read:
 * its schema, text the database cannot store, its size, its idempotency key, a form's origin.
 * Calls without a valid credential, without the permission or over the rate limit leave none.
 */
describe.each(TEST_DATABASES)('intake log entries of refused calls on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  let requests = 0;

  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t);
  });
  afterAll(async () => t?.close());

  interface Entry {
    request_id: string;
    endpoint: string;
    outcome: string;
    status_code: number;
    record_id: string | null;
    entity: string | null;
    source: string;
    warnings: { key: string; reason: string }[];
    error: string | null;
  }

  /** Sends a call with its own request id and answers its status with its log entries. */
  async function call(options: {
    url: string;
    body?: unknown;
    payload?: string;
    key?: string | null;
    headers?: Record<string, string>;
    of?: TestAccount;
  }) {
    const requestId = `refusal-${++requests}`;
    const response = await t.request({
      method: 'POST',
      url: options.url,
      ...(options.key === null ? {} : { key: options.key ?? account.apiKey }),
      headers: { 'x-request-id': requestId, ...options.headers },
      ...(options.payload === undefined ? { body: options.body } : { payload: options.payload }),
    });
    return { response, entries: await entriesOf(requestId, options.of ?? account) };
  }

  async function entriesOf(requestId: string, of: TestAccount): Promise<Entry[]> {
    const response = await t.request({
      method: 'GET',
      url: `/api/v1/intake-log?request_id=${requestId}`,
      key: of.apiKey,
    });
    expect(response.statusCode).toBe(200);
    return response.json().entries;
  }

  describe('happy path', () => {
    it('logs a body its schema refuses, with the details the answer gave', async () => {
      const { response, entries } = await call({
        url: '/api/v1/records',
        body: { fields: { email: 'a@b.co' } },
      });
      expect(response.statusCode).toBe(422);
      expect(entries).toEqual([
        expect.objectContaining({
          endpoint: 'records',
          outcome: 'refused',
          status_code: 422,
          record_id: null,
          entity: null,
          source: 'api',
          error: 'validation_failed',
          warnings: response.json().details,
        }),
      ]);
      const wrongType = await call({
        url: '/api/v1/records',
        body: { entity: 'lead', fields: { email: 'a@b.co' }, note: 42, meta: { source: 'Facebook' } },
      });
      expect(wrongType.response.statusCode).toBe(422);
      expect(wrongType.entries).toMatchObject([
        { entity: 'lead', source: 'Facebook', error: 'validation_failed' },
      ]);
    });

    it('logs text the database cannot store, naming it as the answer does', async () => {
      const { response, entries } = await call({
        url: '/api/v1/records',
        payload: '{"entity":"lead","fields":{"email":"x@b.co","a\\u0000":"x"}}',
        headers: { 'content-type': 'application/json' },
      });
      expect(response.statusCode).toBe(422);
      expect(response.json().details[0].key).toBe('fields.a\\u0000');
      expect(entries).toMatchObject([
        { outcome: 'refused', error: 'validation_failed', warnings: [{ key: 'fields.a\\u0000' }] },
      ]);
      const entity = await call({ url: '/api/v1/records', body: { entity: 'le\u0000ad', fields: {} } });
      expect(entity.response.statusCode).toBe(422);
      expect(entity.entries).toMatchObject([{ entity: 'le\\u0000ad', error: 'validation_failed' }]);
    });

    it('logs a bad idempotency key, a reused one, a keyed refusal once, and each replay as replayed', async () => {
      const bad = await call({
        url: '/api/v1/records',
        body: { entity: 'lead', fields: { email: 'k@b.co' } },
        headers: { 'idempotency-key': 'x'.repeat(256) },
      });
      expect(bad.response.statusCode).toBe(400);
      expect(bad.entries).toMatchObject([
        { outcome: 'refused', status_code: 400, error: 'invalid_idempotency_key' },
      ]);

      const first = await call({
        url: '/api/v1/records',
        body: { entity: 'lead', fields: { email: 'k@b.co' } },
        headers: { 'idempotency-key': 'log-key-1' },
      });
      expect(first.response.statusCode).toBe(201);
      expect(first.entries).toMatchObject([{ outcome: 'created' }]);
      const again = await call({
        url: '/api/v1/records',
        body: { entity: 'lead', fields: { email: 'k@b.co' } },
        headers: { 'idempotency-key': 'log-key-1' },
      });
      expect(again.response.headers['idempotent-replayed']).toBe('true');
      expect(again.entries).toEqual([
        expect.objectContaining({
          endpoint: 'records',
          outcome: 'replayed',
          status_code: 201,
          record_id: first.response.json().id,
          entity: 'lead',
          error: null,
        }),
      ]);
      const reused = await call({
        url: '/api/v1/records',
        body: { entity: 'lead', fields: { email: 'other@b.co' } },
        headers: { 'idempotency-key': 'log-key-1' },
      });
      expect(reused.response.statusCode).toBe(422);
      expect(reused.entries).toMatchObject([{ outcome: 'refused', error: 'idempotency_key_reused' }]);

      // Refused while the lead is read, after its schema (a stage without the CRM module): the
      // refusal becomes the key's stored answer, logged once.
      const keyed = { entity: 'lead', email: 'm@b.co', 'status:Sales': 'New' };
      const refused = await call({
        url: '/api/intake',
        body: keyed,
        headers: { 'idempotency-key': 'log-key-2' },
      });
      expect(refused.response.statusCode).toBe(403);
      expect(refused.entries).toMatchObject([
        { endpoint: 's1.intake', outcome: 'refused', entity: 'lead', error: 'module_not_enabled' },
      ]);
      const replay = await call({
        url: '/api/intake',
        body: keyed,
        headers: { 'idempotency-key': 'log-key-2' },
      });
      expect(replay.response.statusCode).toBe(403);
      expect(replay.response.headers['idempotent-replayed']).toBe('true');
      expect(replay.entries).toMatchObject([
        { endpoint: 's1.intake', outcome: 'replayed', status_code: 403, record_id: null, entity: 'lead' },
      ]);
      // An S2 refusal's replay names its code.
      const s2Keyed = { entity: 'lead', fields: { email: 'r@b.co', interest: 'Wind' } };
      const s2Refused = await call({
        url: '/api/v1/records',
        body: s2Keyed,
        headers: { 'idempotency-key': 'log-key-3' },
      });
      expect(s2Refused.response.statusCode).toBe(422);
      const s2Replay = await call({
        url: '/api/v1/records',
        body: s2Keyed,
        headers: { 'idempotency-key': 'log-key-3' },
      });
      expect(s2Replay.entries).toMatchObject([
        { outcome: 'replayed', status_code: 422, error: 'validation_failed' },
      ]);
      const filtered = await t.request({
        method: 'GET',
        url: '/api/v1/intake-log?outcome=replayed&limit=10',
        key: account.apiKey,
      });
      expect(filtered.json().entries.length).toBeGreaterThanOrEqual(3);
    });

    it('logs what the service refuses exactly once', async () => {
      const { response, entries } = await call({
        url: '/api/v1/records',
        body: { entity: 'lead', fields: { email: 'w@b.co', interest: 'Wind' } },
      });
      expect(response.statusCode).toBe(422);
      expect(entries).toMatchObject([{ outcome: 'refused', entity: 'lead', error: 'validation_failed' }]);
    });

    it('logs refused bulk calls and S1 calls under their own doors', async () => {
      const tooMany = await call({
        url: '/api/v1/records/bulk',
        body: { records: Array.from({ length: 101 }, () => ({ entity: 'lead', fields: {} })) },
      });
      expect(tooMany.response.statusCode).toBeGreaterThanOrEqual(400);
      expect(tooMany.entries).toMatchObject([
        { endpoint: 'records.bulk', outcome: 'refused', status_code: tooMany.response.statusCode },
      ]);
      const s1 = await call({
        url: '/api/intake',
        body: { entity: 'lead', email: 's1@b.co', viewers: 'nobody@b.co' },
      });
      expect(s1.response.statusCode).toBe(422);
      expect(s1.entries).toMatchObject([{ endpoint: 's1.intake', outcome: 'refused', entity: 'lead' }]);
      const s1Bulk = await call({ url: '/api/leads/bulk', body: { entity: 'lead' } });
      expect(s1Bulk.response.statusCode).toBe(422);
      expect(s1Bulk.entries).toMatchObject([{ endpoint: 's1.bulk', outcome: 'refused', entity: 'lead' }]);
    });

    it('logs a website form post from an origin the source does not allow, with the source', async () => {
      const source = await createSource(t, account, {
        name: 'Shop form',
        allowed_origins: ['https://shop.example'],
      });
      const { response, entries } = await call({
        url: source.url,
        key: null,
        payload: 'entity=lead&email=o%40b.co',
        headers: { 'content-type': FORM, origin: 'https://evil.example' },
      });
      expect(response.statusCode).toBe(403);
      expect(entries).toMatchObject([
        {
          endpoint: 'in',
          outcome: 'refused',
          status_code: 403,
          error: 'origin_not_allowed',
          source: 'Shop form',
        },
      ]);
    });
  });

  describe('errors', () => {
    it('leaves no entry for a wrong credential, a missing permission or the rate limit', async () => {
      const wrongKey = await call({ url: '/api/v1/records', body: {}, key: 'lk_wrong' });
      expect(wrongKey.response.statusCode).toBe(401);
      const readOnly = await t.request({
        method: 'POST',
        url: '/api/v1/settings/api-keys',
        key: account.apiKey,
        body: { name: 'reader', permissions: ['records:read'] },
      });
      expect(readOnly.statusCode).toBe(201);
      const forbidden = await call({ url: '/api/v1/records', body: {}, key: readOnly.json().key });
      expect(forbidden.response.statusCode).toBe(403);
      expect([...wrongKey.entries, ...forbidden.entries]).toEqual([]);

      const limited = await accountWithLeads(t);
      const patched = await t.app.inject({
        method: 'PATCH',
        url: `/admin/v1/accounts/${limited.id}`,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        payload: { rate_limit_per_minute: 1 },
      });
      expect(patched.statusCode).toBe(200);
      // The limited account's own reads of its log would count against its limit: read the table.
      const logged = async () =>
        (
          await sql<{
            n: number;
          }>`SELECT count(*)::int AS n FROM intake_log WHERE account_id = ${limited.id}`.execute(t.db)
        ).rows[0]!.n;
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) {
        const response = await t.request({
          method: 'POST',
          url: '/api/v1/records',
          key: limited.apiKey,
          body: {},
        });
        statuses.push(response.statusCode);
      }
      expect(statuses).toEqual([422, 429, 429]);
      expect(await logged()).toBe(1);
    });
  });

  describe('security', () => {
    it('a remembered key revoked meanwhile gets 401 and leaves no entry', async () => {
      const issued = await t.request({
        method: 'POST',
        url: '/api/v1/settings/api-keys',
        key: account.apiKey,
        body: { name: 'soon revoked' },
      });
      const { id, key } = issued.json();
      const first = await call({
        url: '/api/v1/records',
        body: { entity: 'lead', fields: { email: 'r@b.co' } },
        key,
      });
      expect(first.response.statusCode).toBe(201);
      // Revoked behind the node's back, as another node would: the key stays remembered here.
      await sql`UPDATE api_keys SET revoked_at = now() WHERE account_id = ${account.id} AND id = ${id}`.execute(
        t.db,
      );
      const refused = await call({ url: '/api/v1/records', body: { fields: {} }, key });
      expect(refused.response.statusCode).toBe(401);
      expect(refused.entries).toEqual([]);
    });

    it('writes the entry to the calling account only', async () => {
      const other = await accountWithLeads(t);
      const { response } = await call({
        url: '/api/v1/records',
        body: { fields: {} },
        key: other.apiKey,
        of: other,
      });
      expect(response.statusCode).toBe(422);
      const requestId = `refusal-${requests}`;
      expect(await entriesOf(requestId, other)).toHaveLength(1);
      expect(await entriesOf(requestId, account)).toEqual([]);
    });
  });
});

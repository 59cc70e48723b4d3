import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';

describe.each(TEST_DATABASES)('authentication on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;

  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await t.createAccount();
  });
  afterAll(async () => t?.close());

  describe('happy path', () => {
    it('accepts the key as a Bearer value', async () => {
      const res = await t.request({ method: 'GET', url: '/api/v1/entities', key: account.apiKey });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ entities: [], modules: [] });
    });

    it('accepts the bare key without the Bearer prefix', async () => {
      const res = await t.request({
        method: 'GET',
        url: '/api/v1/entities',
        headers: { authorization: account.apiKey },
      });
      expect(res.statusCode).toBe(200);
    });
  });

  describe('errors', () => {
    it('answers 401 unauthorized without a key, on S2 and in the S1 shape on S1', async () => {
      const s2 = await t.request({ method: 'GET', url: '/api/v1/entities' });
      expect(s2.statusCode).toBe(401);
      expect(s2.json()).toEqual({ error: 'unauthorized' });
      const s1 = await t.request({ method: 'GET', url: '/api/entities' });
      expect(s1.statusCode).toBe(401);
      expect(s1.json()).toMatchObject({ status: 'error', message: expect.any(String) });
    });

    it('refuses an unknown key, a key with a broken checksum, and a key in the query', async () => {
      const last = account.apiKey.at(-1) === 'A' ? 'B' : 'A';
      const mistyped = account.apiKey.slice(0, -1) + last;
      for (const key of ['lk_unknown', mistyped]) {
        const res = await t.request({ method: 'GET', url: '/api/v1/entities', key });
        expect(res.statusCode).toBe(401);
      }
      const inQuery = await t.request({ method: 'GET', url: `/api/v1/entities?api_key=${account.apiKey}` });
      expect(inQuery.statusCode).toBe(401);
    });
  });

  describe('security', () => {
    it('stops a revoked key at once', async () => {
      const created = await t.request({
        method: 'POST',
        url: '/api/v1/settings/api-keys',
        key: account.apiKey,
        body: { name: 'short-lived' },
      });
      expect(created.statusCode).toBe(201);
      const { id, key } = created.json();
      expect((await t.request({ method: 'GET', url: '/api/v1/entities', key })).statusCode).toBe(200);
      const revoked = await t.request({
        method: 'DELETE',
        url: `/api/v1/settings/api-keys/${id}`,
        key: account.apiKey,
      });
      expect(revoked.statusCode).toBe(204);
      const after = await t.request({ method: 'GET', url: '/api/v1/entities', key });
      expect(after.statusCode).toBe(401);
      expect(after.json()).toEqual({ error: 'unauthorized' });
    });

    it('does not let an account key use the operator API, nor the operator token an account route', async () => {
      const asAccount = await t.request({ method: 'GET', url: '/admin/v1/accounts', key: account.apiKey });
      expect(asAccount.statusCode).toBe(401);
      const asAdmin = await t.request({ method: 'GET', url: '/api/v1/entities', key: ADMIN_TOKEN });
      expect(asAdmin.statusCode).toBe(401);
    });
  });
});

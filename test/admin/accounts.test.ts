import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PERMISSIONS } from '../../src/http/auth.ts';
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';

describe.each(TEST_DATABASES)('operator API on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind);
  });
  afterAll(async () => t?.close());

  const admin = (method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown) =>
    t.request({ method, url, key: ADMIN_TOKEN, body });

  describe('happy path', () => {
    it('creates an account with its first key, shown once, that works at once', async () => {
      const created = await admin('POST', '/admin/v1/accounts', {
        name: 'Acme',
        modules: ['crm', 'booking'],
        rate_limit_per_minute: 600,
      });
      expect(created.statusCode).toBe(201);
      const body = created.json();
      expect(body).toMatchObject({ name: 'Acme', modules: ['booking', 'crm'], rate_limit_per_minute: 600 });
      expect(body.api_key.key).toMatch(/^lk_[0-9A-Za-z]{33}$/);
      const entities = await t.request({ method: 'GET', url: '/api/v1/entities', key: body.api_key.key });
      expect(entities.json().modules).toEqual(['booking', 'crm']);
      const read = await admin('GET', `/admin/v1/accounts/${body.id}`);
      expect(read.json()).not.toHaveProperty('api_key');
      expect(JSON.stringify(read.json())).not.toContain(body.api_key.key);
    });

    it('defaults to no modules and 1,200 requests a minute', async () => {
      const created = await admin('POST', '/admin/v1/accounts', { name: 'Plain' });
      expect(created.json()).toMatchObject({ modules: [], rate_limit_per_minute: 1200 });
    });

    it('changes name, modules and rate limit', async () => {
      const { id, api_key } = (await admin('POST', '/admin/v1/accounts', { name: 'Before' })).json();
      const patched = await admin('PATCH', `/admin/v1/accounts/${id}`, {
        name: 'After',
        modules: ['distribution'],
        rate_limit_per_minute: 30,
      });
      expect(patched.statusCode).toBe(200);
      expect(patched.json()).toMatchObject({
        id,
        name: 'After',
        modules: ['distribution'],
        rate_limit_per_minute: 30,
      });
      const entities = await t.request({ method: 'GET', url: '/api/v1/entities', key: api_key.key });
      expect(entities.json().modules).toEqual(['distribution']);
    });

    it('lists accounts with cursor pagination', async () => {
      for (let i = 0; i < 3; i++) await admin('POST', '/admin/v1/accounts', { name: `Page ${i}` });
      const seen = new Set<string>();
      let cursor: string | null = null;
      let pages = 0;
      do {
        const response = await admin('GET', `/admin/v1/accounts?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        expect(response.statusCode).toBe(200);
        const page = response.json();
        expect(page.accounts.length).toBeLessThanOrEqual(2);
        for (const account of page.accounts) {
          expect(seen.has(account.id)).toBe(false);
          seen.add(account.id);
        }
        cursor = page.next_cursor;
        pages += 1;
      } while (cursor && pages < 50);
      expect(seen.size).toBeGreaterThanOrEqual(3);
      expect(pages).toBeGreaterThanOrEqual(2);
    });
    it('issues a key to an account whose last key was revoked, answered as the settings API answers', async () => {
      const { id, api_key } = (await admin('POST', '/admin/v1/accounts', { name: 'Locked out' })).json();
      const made = await t.request({
        method: 'POST',
        url: '/api/v1/settings/api-keys',
        key: api_key.key,
        body: { name: 'Spare' },
      });
      for (const keyId of [made.json().id, api_key.id]) {
        const revoked = await t.request({
          method: 'DELETE',
          url: `/api/v1/settings/api-keys/${keyId}`,
          key: api_key.key,
        });
        expect(revoked.statusCode).toBe(204);
      }
      const lockedOut = await t.request({
        method: 'GET',
        url: '/api/v1/settings/api-keys',
        key: api_key.key,
      });
      expect(lockedOut.statusCode).toBe(401);

      const issued = await admin('POST', `/admin/v1/accounts/${id}/api-keys`, {});
      expect(issued.statusCode).toBe(201);
      const key = issued.json();
      expect(Object.keys(key).sort()).toEqual(Object.keys(made.json()).sort());
      expect(key).toMatchObject({
        name: 'Operator key',
        strict: false,
        manages_users: true,
        key: expect.stringMatching(/^lk_[0-9A-Za-z]{33}$/),
      });
      expect([...key.permissions].sort()).toEqual([...PERMISSIONS].sort());
      expect(key.prefix).toBe(key.key.slice(0, 10));
      const listed = await t.request({ method: 'GET', url: '/api/v1/settings/api-keys', key: key.key });
      expect(listed.statusCode).toBe(200);
      expect(listed.json().api_keys.map((k: { id: string }) => k.id)).toEqual([key.id]);
      expect(listed.body).not.toContain(key.key);
    });

    it('issues a key with the name, permissions and strict mode asked for', async () => {
      const { id } = (await admin('POST', '/admin/v1/accounts', { name: 'Narrow' })).json();
      const issued = await admin('POST', `/admin/v1/accounts/${id}/api-keys`, {
        name: 'Reader',
        permissions: ['records:read'],
        strict: true,
      });
      expect(issued.statusCode).toBe(201);
      // Managing users makes owners: only a key with every permission may.
      expect(issued.json()).toMatchObject({
        name: 'Reader',
        permissions: ['records:read'],
        strict: true,
        manages_users: false,
      });
      const settings = await t.request({
        method: 'GET',
        url: '/api/v1/settings/api-keys',
        key: issued.json().key,
      });
      expect(settings.statusCode).toBe(403);
    });
  });

  describe('errors', () => {
    it('refuses unknown modules, an empty name and unknown keys with 422', async () => {
      for (const body of [
        { name: 'X', modules: ['telepathy'] },
        { name: '' },
        { name: 'X', plan: 'gold' },
        {},
      ]) {
        const response = await admin('POST', '/admin/v1/accounts', body);
        expect(response.statusCode, JSON.stringify(body)).toBe(422);
        expect(response.json().error).toBe('validation_failed');
      }
    });

    it('refuses a name of blanks only (create, rename, key) as required, and keeps blanks around text', async () => {
      const blankDetail = [
        { key: 'name', reason: 'required', message: 'must hold a character other than blanks' },
      ];
      const before = await t.db.selectFrom('accounts').select('id').execute();
      for (const name of ['   ', '\t', ' \n\t\r ', '\u00a0']) {
        const refused = await admin('POST', '/admin/v1/accounts', { name });
        expect(refused.statusCode, JSON.stringify(name)).toBe(422);
        expect(refused.json()).toEqual({ error: 'validation_failed', details: blankDetail });
      }
      expect(await t.db.selectFrom('accounts').select('id').execute()).toHaveLength(before.length);
      const { id } = (await admin('POST', '/admin/v1/accounts', { name: '  Padded  ' })).json();
      expect((await admin('GET', `/admin/v1/accounts/${id}`)).json().name).toBe('  Padded  ');
      const renamed = await admin('PATCH', `/admin/v1/accounts/${id}`, { name: '\n' });
      expect(renamed.statusCode).toBe(422);
      expect(renamed.json().details).toEqual(blankDetail);
      expect((await admin('GET', `/admin/v1/accounts/${id}`)).json().name).toBe('  Padded  ');
      const key = await admin('POST', `/admin/v1/accounts/${id}/api-keys`, { name: ' \t ' });
      expect(key.statusCode).toBe(422);
      expect(key.json().details).toEqual(blankDetail);
    });

    it('answers 404 for an unknown account and a malformed id', async () => {
      expect((await admin('GET', '/admin/v1/accounts/00000000-0000-4000-8000-000000000000')).statusCode).toBe(
        404,
      );
      expect((await admin('GET', '/admin/v1/accounts/not-a-uuid')).statusCode).toBe(404);
      expect(
        (await admin('PATCH', '/admin/v1/accounts/00000000-0000-4000-8000-000000000000', { name: 'x' }))
          .statusCode,
      ).toBe(404);
    });

    it('issues no key to an unknown account (404) nor for a wrong body (422)', async () => {
      for (const url of [
        '/admin/v1/accounts/00000000-0000-4000-8000-000000000000/api-keys',
        '/admin/v1/accounts/not-a-uuid/api-keys',
      ]) {
        const response = await admin('POST', url, {});
        expect(response.statusCode, url).toBe(404);
        expect(response.json().error).toBe('not_found');
      }
      const { id, api_key } = (await admin('POST', '/admin/v1/accounts', { name: 'Bodies' })).json();
      for (const body of [
        { name: 'X', plan: 'gold' },
        { name: '' },
        { name: 'x'.repeat(101) },
        { permissions: ['telepathy'] },
        { permissions: 'records:read' },
        { strict: 'yes' },
        [],
        // A key with no permission is no key the API documents; a name twice is a mistake.
        { permissions: [] },
        { permissions: ['settings', 'settings'] },
      ]) {
        const response = await admin('POST', `/admin/v1/accounts/${id}/api-keys`, body);
        expect(response.statusCode, JSON.stringify(body)).toBe(422);
        expect(response.json().error).toBe('validation_failed');
      }
      const keys = await t.request({ method: 'GET', url: '/api/v1/settings/api-keys', key: api_key.key });
      expect(keys.json().api_keys.map((k: { id: string }) => k.id)).toEqual([api_key.id]);
    });

    it('rejects a bad cursor with 422', async () => {
      const response = await admin('GET', '/admin/v1/accounts?cursor=garbage');
      expect(response.statusCode).toBe(422);
    });
  });

  describe('security', () => {
    it('answers 401 without the operator token, with a wrong one, and with an account key', async () => {
      const { api_key } = (await admin('POST', '/admin/v1/accounts', { name: 'Sec' })).json();
      for (const key of [undefined, 'adm_wrong', api_key.key]) {
        const response = await t.request({ method: 'GET', url: '/admin/v1/accounts', key });
        expect(response.statusCode).toBe(401);
        expect(response.json()).toEqual({ error: 'unauthorized' });
      }
    });

    it('issues account keys to the operator token alone: an account key gets 401, even for its own account', async () => {
      const { id, api_key } = (await admin('POST', '/admin/v1/accounts', { name: 'Own' })).json();
      for (const key of [undefined, 'adm_wrong', api_key.key]) {
        const response = await t.request({
          method: 'POST',
          url: `/admin/v1/accounts/${id}/api-keys`,
          key,
          body: { name: 'Mine' },
        });
        expect(response.statusCode).toBe(401);
        expect(response.json()).toEqual({ error: 'unauthorized' });
      }
      const keys = await t.request({ method: 'GET', url: '/api/v1/settings/api-keys', key: api_key.key });
      expect(keys.json().api_keys.map((k: { id: string }) => k.id)).toEqual([api_key.id]);
    });
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
  });
});

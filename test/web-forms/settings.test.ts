import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

/** A source's website-form settings through the settings API (decisions §13). */
describe.each(TEST_DATABASES)('website forms: source settings on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t);
  });
  afterAll(async () => t?.close());

  const call = (method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown, key = account.apiKey) =>
    t.request({ method, url, key, body });
  let counter = 0;
  const create = (settings: Record<string, unknown> = {}) =>
    call('POST', '/api/v1/settings/sources', { name: `Site ${++counter}`, ...settings });

  describe('happy path', () => {
    it('creates a source with defaults, reads it, and lists it with its settings', async () => {
      const created = await create();
      expect(created.statusCode).toBe(201);
      expect(created.json()).toMatchObject({
        success_url: null,
        error_url: null,
        allowed_origins: [],
        honeypot_field: '_hp',
        rate_limit_per_minute: 60,
      });
      const read = await call('GET', `/api/v1/settings/sources/${created.json().id}`);
      expect(read.statusCode).toBe(200);
      expect(read.json()).toEqual({
        id: created.json().id,
        name: created.json().name,
        token_prefix: created.json().token.slice(0, 10),
        success_url: null,
        error_url: null,
        allowed_origins: [],
        honeypot_field: '_hp',
        rate_limit_per_minute: 60,
        created_at: created.json().created_at,
      });
      expect(read.body).not.toContain(created.json().token);
      const listed = (await call('GET', '/api/v1/settings/sources')).json().sources;
      expect(listed.find((s: { id: string }) => s.id === created.json().id)).toEqual(read.json());
    });

    it('takes every setting on creation, normalizing origins', async () => {
      const created = await create({
        success_url: 'https://www.example.com/danke?x=1',
        error_url: 'http://127.0.0.1:8080/fehler',
        allowed_origins: ['https://WWW.Example.com', 'https://www.example.com:443', 'http://localhost:5173'],
        honeypot_field: 'website',
        rate_limit_per_minute: 5,
      });
      expect(created.statusCode).toBe(201);
      expect(created.json()).toMatchObject({
        success_url: 'https://www.example.com/danke?x=1',
        error_url: 'http://127.0.0.1:8080/fehler',
        allowed_origins: ['https://www.example.com', 'http://localhost:5173'],
        honeypot_field: 'website',
        rate_limit_per_minute: 5,
      });
    });

    it('PATCH changes the given keys only; null clears an address or the trap', async () => {
      const { id } = (
        await create({ success_url: 'https://a.example/ok', allowed_origins: ['https://a.example'] })
      ).json();
      const patched = await call('PATCH', `/api/v1/settings/sources/${id}`, { rate_limit_per_minute: 10 });
      expect(patched.statusCode).toBe(200);
      expect(patched.json()).toMatchObject({
        success_url: 'https://a.example/ok',
        allowed_origins: ['https://a.example'],
        rate_limit_per_minute: 10,
        honeypot_field: '_hp',
      });
      const cleared = await call('PATCH', `/api/v1/settings/sources/${id}`, {
        success_url: null,
        honeypot_field: null,
        allowed_origins: [],
        name: 'Renamed site',
      });
      expect(cleared.json()).toMatchObject({
        name: 'Renamed site',
        success_url: null,
        honeypot_field: null,
        allowed_origins: [],
        rate_limit_per_minute: 10,
      });
      expect((await call('GET', `/api/v1/settings/sources/${id}`)).json()).toEqual(cleared.json());
      const unchanged = await call('PATCH', `/api/v1/settings/sources/${id}`, {});
      expect(unchanged.json()).toEqual(cleared.json());
    });
  });

  describe('errors', () => {
    it('refuses addresses that are not absolute http(s) addresses', async () => {
      for (const success_url of [
        'ftp://a.example/x',
        'javascript:alert(1)',
        '/relative',
        'https://user:pw@a.example/',
        // Written other than a URL is: the parser would mend these, and the address stored and
        // shown would not be the one the browser is sent to.
        '  https://a.example/ok  ',
        'https:/a.example/ok',
        'https:\\\\a.example\\ok',
        'https://a.example/o k',
      ]) {
        const answer = await create({ success_url });
        expect({ success_url, status: answer.statusCode }).toEqual({ success_url, status: 422 });
        expect(answer.json().details[0].key).toBe('success_url');
      }
      const error = await create({ error_url: 'https://' });
      expect(error.statusCode).toBe(422);
    });

    it('refuses origins with a path, a wildcard or another scheme, and too many origins', async () => {
      for (const origin of [
        'https://a.example/',
        'https://a.example/path',
        'https://*.a.example',
        'ftp://a.example',
        'a.example',
      ]) {
        const answer = await create({ allowed_origins: ['https://ok.example', origin] });
        expect({ origin, status: answer.statusCode }).toEqual({ origin, status: 422 });
        expect(answer.json().details[0].key).toBe('allowed_origins.1');
      }
      const many = Array.from({ length: 51 }, (_, index) => `https://s${index}.example`);
      expect((await create({ allowed_origins: many })).statusCode).toBe(422);
    });

    it('refuses a trap field that is a key of the body, and limits out of bounds', async () => {
      for (const honeypot_field of ['entity', 'fields', 'meta', 'note', 'has space', 'meta[x]', '']) {
        const answer = await create({ honeypot_field });
        expect({ honeypot_field, status: answer.statusCode }).toEqual({ honeypot_field, status: 422 });
      }
      for (const rate_limit_per_minute of [0, -1, 10_001, 1.5]) {
        const answer = await create({ rate_limit_per_minute });
        expect({ rate_limit_per_minute, status: answer.statusCode }).toEqual({
          rate_limit_per_minute,
          status: 422,
        });
      }
    });

    it('answers 404 for an unknown source and 409 for a name taken by another source', async () => {
      const missing = '00000000-0000-4000-8000-000000000000';
      expect((await call('GET', `/api/v1/settings/sources/${missing}`)).statusCode).toBe(404);
      expect(
        (await call('PATCH', `/api/v1/settings/sources/${missing}`, { rate_limit_per_minute: 5 })).statusCode,
      ).toBe(404);
      const first = (await create()).json();
      const second = (await create()).json();
      const taken = await call('PATCH', `/api/v1/settings/sources/${second.id}`, {
        name: first.name.toUpperCase(),
      });
      expect(taken.statusCode).toBe(409);
      const same = await call('PATCH', `/api/v1/settings/sources/${first.id}`, { name: first.name });
      expect(same.statusCode).toBe(200);
    });
  });

  describe('security', () => {
    it("answers 404 for another account's source and 403 for a key without settings", async () => {
      const other = await accountWithLeads(t);
      const theirs = (
        await call('POST', '/api/v1/settings/sources', { name: 'Theirs' }, other.apiKey)
      ).json();
      expect((await call('GET', `/api/v1/settings/sources/${theirs.id}`)).statusCode).toBe(404);
      const patch = await call('PATCH', `/api/v1/settings/sources/${theirs.id}`, {
        success_url: 'https://evil.example',
      });
      expect(patch.statusCode).toBe(404);
      const unchanged = await call('GET', `/api/v1/settings/sources/${theirs.id}`, undefined, other.apiKey);
      expect(unchanged.json().success_url).toBeNull();

      const limited = await call('POST', '/api/v1/settings/api-keys', {
        name: 'Records only',
        permissions: ['records:read'],
      });
      const key = limited.json().key;
      expect((await call('GET', `/api/v1/settings/sources/${theirs.id}`, undefined, key)).statusCode).toBe(
        403,
      );
      expect((await call('PATCH', `/api/v1/settings/sources/${theirs.id}`, {}, key)).statusCode).toBe(403);
    });

    it('needs an API key: a source token or nothing is 401', async () => {
      const source = (await create()).json();
      const withToken = await call('GET', `/api/v1/settings/sources/${source.id}`, undefined, source.token);
      expect(withToken.statusCode).toBe(401);
      const none = await t.request({
        method: 'PATCH',
        url: `/api/v1/settings/sources/${source.id}`,
        body: {},
      });
      expect(none.statusCode).toBe(401);
    });
  });
});

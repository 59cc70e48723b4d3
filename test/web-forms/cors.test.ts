import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { BROWSER_ACCEPT, createSource, FORM, recordsOf } from './support.ts';

/** CORS on /api/v1/in/* only, and the origin check of posts (decisions §13). */
describe.each(TEST_DATABASES)('website forms: CORS and origins on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  let listed: { id: string; url: string };
  let open: { id: string; url: string };
  const ALLOWED = 'https://www.example.com';
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t);
    listed = await createSource(t, account, {
      allowed_origins: [ALLOWED, 'http://127.0.0.1:8080'],
      error_url: 'https://www.example.com/oops',
    });
    open = await createSource(t, account);
  });
  afterAll(async () => t?.close());

  const preflight = (url: string, origin: string) =>
    t.request({
      method: 'OPTIONS',
      url,
      headers: {
        origin,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    });
  const post = (url: string, headers: Record<string, string>, email = 'cors@b.co') =>
    t.request({
      method: 'POST',
      url,
      headers: { 'content-type': FORM, ...headers },
      payload: `entity=lead&fields%5Bemail%5D=${encodeURIComponent(email)}`,
    });

  describe('happy path', () => {
    it('answers a preflight from an allowed origin, naming that origin', async () => {
      const answer = await preflight(listed.url, ALLOWED);
      expect(answer.statusCode).toBe(204);
      expect(answer.headers['access-control-allow-origin']).toBe(ALLOWED);
      expect(answer.headers['access-control-allow-methods']).toBe('POST');
      expect(String(answer.headers['access-control-allow-headers']).toLowerCase()).toContain('content-type');
      expect(answer.headers['access-control-allow-credentials']).toBeUndefined();
      expect(answer.headers.vary).toContain('Origin');
    });

    it('lets any origin post and read when the list is empty', async () => {
      const pre = await preflight(open.url, 'https://anywhere.example');
      expect(pre.headers['access-control-allow-origin']).toBe('*');
      const answer = await post(open.url, { origin: 'https://anywhere.example' }, 'any@b.co');
      expect(answer.statusCode).toBe(201);
      expect(answer.headers['access-control-allow-origin']).toBe('*');
      expect(answer.headers['access-control-expose-headers']).toContain('Retry-After');
      expect(answer.headers['access-control-allow-credentials']).toBeUndefined();
    });

    it('takes a post from an allowed origin, or with a Referer of one, or naming none', async () => {
      const byOrigin = await post(listed.url, { origin: ALLOWED }, 'origin@b.co');
      expect(byOrigin.statusCode).toBe(201);
      expect(byOrigin.headers['access-control-allow-origin']).toBe(ALLOWED);
      expect(byOrigin.headers.vary).toContain('Origin');
      const byReferer = await post(
        listed.url,
        { referer: 'http://127.0.0.1:8080/contact.html' },
        'referer@b.co',
      );
      expect(byReferer.statusCode).toBe(201);
      const byServer = await post(listed.url, {}, 'server@b.co');
      expect(byServer.statusCode).toBe(201);
      expect(byServer.headers['access-control-allow-origin']).toBeUndefined();
    });
  });

  describe('errors', () => {
    it('refuses a post from another origin with 403 origin_not_allowed and stores nothing', async () => {
      const before = (await recordsOf(t, account)).length;
      const answer = await post(listed.url, { origin: 'https://evil.example' });
      expect(answer.statusCode).toBe(403);
      expect(answer.json()).toEqual({ error: 'origin_not_allowed' });
      expect(answer.headers['access-control-allow-origin']).toBeUndefined();
      const byReferer = await post(listed.url, { referer: 'https://evil.example/form' });
      expect(byReferer.statusCode).toBe(403);
      // The Origin decides when both are sent.
      const both = await post(listed.url, { origin: 'https://evil.example', referer: `${ALLOWED}/form` });
      expect(both.statusCode).toBe(403);
      const opaque = await post(listed.url, { origin: 'null' });
      expect(opaque.statusCode).toBe(403);
      const port = await post(listed.url, { origin: 'https://www.example.com:8443' });
      expect(port.statusCode).toBe(403);
      expect((await recordsOf(t, account)).length).toBe(before);
    });

    it('reads an empty Origin as none, so that the Referer is checked', async () => {
      const before = (await recordsOf(t, account)).length;
      const foreign = await post(listed.url, { origin: '', referer: 'https://evil.example/form' });
      expect(foreign.statusCode).toBe(403);
      expect(foreign.json()).toEqual({ error: 'origin_not_allowed' });
      expect((await recordsOf(t, account)).length).toBe(before);
      const own = await post(listed.url, { origin: '', referer: `${ALLOWED}/form` }, 'empty-origin@b.co');
      expect(own.statusCode).toBe(201);
      const neither = await post(listed.url, { origin: '' }, 'empty-origin2@b.co');
      expect(neither.statusCode).toBe(201);
    });

    it('shows a browser the refusal page, never its error_url', async () => {
      const answer = await post(listed.url, { origin: 'https://evil.example', accept: BROWSER_ACCEPT });
      expect(answer.statusCode).toBe(403);
      expect(answer.headers.location).toBeUndefined();
      expect(answer.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(answer.body).toContain('may not be sent from the page it is on');
    });

    it('answers a refused origin’s preflight without Access-Control-Allow-Origin', async () => {
      const answer = await preflight(listed.url, 'https://evil.example');
      expect(answer.statusCode).toBe(204);
      expect(answer.headers['access-control-allow-origin']).toBeUndefined();
    });
  });

  describe('security', () => {
    it('gives no other route CORS: no preflight, no Access-Control headers', async () => {
      const origin = 'https://www.example.com';
      for (const url of [
        '/api/v1/records',
        '/api/v1/settings/sources',
        '/api/intake',
        '/admin/v1/accounts',
      ]) {
        const pre = await t.request({
          method: 'OPTIONS',
          url,
          headers: { origin, 'access-control-request-method': 'POST' },
        });
        expect({ url, status: pre.statusCode }).toEqual({ url, status: 404 });
        expect(pre.headers['access-control-allow-origin']).toBeUndefined();
      }
      const records = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        headers: { origin },
        body: { entity: 'lead', fields: { email: 'nocors@b.co' } },
      });
      expect(records.statusCode).toBe(201);
      expect(Object.keys(records.headers).filter((name) => name.startsWith('access-control-'))).toEqual([]);
      const read = await t.request({
        method: 'GET',
        url: '/api/v1/entities',
        key: account.apiKey,
        headers: { origin },
      });
      expect(Object.keys(read.headers).filter((name) => name.startsWith('access-control-'))).toEqual([]);
    });

    it('lets any origin read an unknown token’s 401, which names no source', async () => {
      const answer = await post('/api/v1/in/st_unknown', { origin: 'https://evil.example' });
      expect(answer.statusCode).toBe(401);
      expect(answer.headers['access-control-allow-origin']).toBe('*');
      const pre = await preflight('/api/v1/in/st_unknown', 'https://evil.example');
      expect(pre.statusCode).toBe(204);
    });

    it('answers a token over 200 characters as an unknown token, not with a bare 404', async () => {
      const long = `/api/v1/in/st_${'x'.repeat(300)}`;
      const unknown = await post('/api/v1/in/st_unknown', { origin: 'https://evil.example' });
      const answer = await post(long, { origin: 'https://evil.example' });
      expect(answer.statusCode).toBe(401);
      expect(answer.json()).toEqual(unknown.json());
      expect(answer.headers['access-control-allow-origin']).toBe('*');
      expect(answer.headers.vary).toBe(unknown.headers.vary);
      const page = await post(long, { accept: BROWSER_ACCEPT });
      const unknownPage = await post('/api/v1/in/st_unknown', { accept: BROWSER_ACCEPT });
      expect(page.statusCode).toBe(401);
      expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(page.body).toBe(unknownPage.body);
      const pre = await preflight(long, 'https://evil.example');
      const unknownPre = await preflight('/api/v1/in/st_unknown', 'https://evil.example');
      expect(pre.statusCode).toBe(204);
      for (const name of ['access-control-allow-origin', 'access-control-allow-methods', 'vary']) {
        expect(pre.headers[name]).toBe(unknownPre.headers[name]);
      }
      // A deeper path below the door is still an address no route serves.
      for (const deeper of [`${long}/more`, '/api/v1/in/st_unknown/more']) {
        const refused = await post(deeper, { origin: 'https://evil.example' });
        expect(refused.statusCode).toBe(404);
        expect(refused.headers['access-control-allow-origin']).toBeUndefined();
        expect((await preflight(deeper, 'https://evil.example')).statusCode).toBe(404);
      }
    });

    it('follows a change of allowed_origins at once', async () => {
      const source = await createSource(t, account, { allowed_origins: ['https://old.example'] });
      expect((await post(source.url, { origin: 'https://new.example' }, 'change1@b.co')).statusCode).toBe(
        403,
      );
      await t.request({
        method: 'PATCH',
        url: `/api/v1/settings/sources/${source.id}`,
        key: account.apiKey,
        body: { allowed_origins: ['https://new.example'] },
      });
      expect((await post(source.url, { origin: 'https://new.example' }, 'change2@b.co')).statusCode).toBe(
        201,
      );
      expect((await post(source.url, { origin: 'https://old.example' }, 'change3@b.co')).statusCode).toBe(
        403,
      );
    });
  });
});

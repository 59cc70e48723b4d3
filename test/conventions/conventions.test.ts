import { connect } from 'node:net';
import { Writable } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, loggerOptions } from '../../src/app.ts';
import { createMemoryRateLimiter } from '../../src/http/rate-limit.ts';
import { hashSecret } from '../../src/lib/credentials.ts';
import { ADMIN_TOKEN, startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

describe.each(TEST_DATABASES)('conventions on every route on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await t.createAccount();
  });
  afterAll(async () => t?.close());

  /** The app with its logger at info, every line it writes kept in `lines`. */
  async function appLoggingAtInfo() {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const app = await buildApp({
      services: t.services,
      adminTokenHash: hashSecret(ADMIN_TOKEN),
      rateLimiter: createMemoryRateLimiter(),
      logger: { ...(loggerOptions('info') as object), stream } as never,
      checkDatabase: async () => {
        await sql`SELECT 1`.execute(t.db);
      },
    });
    return { app, lines };
  }

  describe('request ids', () => {
    it('carries X-Request-Id on answers of every kind, echoing a sane caller id', async () => {
      const cases = [
        { method: 'GET' as const, url: '/api/v1/entities', key: account.apiKey },
        { method: 'GET' as const, url: '/api/v1/entities' },
        { method: 'GET' as const, url: '/api/v1/nothing-here', key: account.apiKey },
        { method: 'POST' as const, url: '/api/v1/settings/users', key: account.apiKey, body: {} },
        {
          method: 'POST' as const,
          url: '/api/v1/settings/users',
          key: account.apiKey,
          headers: { 'content-type': 'text/plain' },
          payload: 'x',
        },
      ];
      for (const request of cases) {
        const response = await t.request({
          ...request,
          headers: { ...request.headers, 'x-request-id': 'abc-123' },
        });
        expect(response.headers['x-request-id'], request.url).toBe('abc-123');
        const fresh = await t.request(request);
        expect(fresh.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      }
    });

    it('replaces an insane caller id with a new one', async () => {
      for (const insane of ['x'.repeat(200), 'has space', 'semi;colon']) {
        const response = await t.request({
          method: 'GET',
          url: '/api/v1/entities',
          headers: { 'x-request-id': insane },
        });
        expect(response.headers['x-request-id']).not.toBe(insane);
        expect(response.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      }
    });
  });

  describe('errors', () => {
    it('answers unknown S2 paths with 404 unknown_endpoint, S1 paths in the S1 body', async () => {
      const s2 = await t.request({ method: 'GET', url: '/api/v1/nothing-here', key: account.apiKey });
      expect(s2.statusCode).toBe(404);
      expect(s2.json()).toEqual({ error: 'unknown_endpoint' });
      const s1 = await t.request({ method: 'GET', url: '/api/nothing-here', key: account.apiKey });
      expect(s1.statusCode).toBe(404);
      expect(s1.json()).toMatchObject({ status: 'error', message: expect.any(String) });
      // Whatever body it carries: an empty or broken JSON body, another media type, no route's method.
      for (const [method, url, contentType, payload] of [
        ['POST', '/api/v1/crm/nothing', 'application/json', ''],
        ['POST', '/api/v1/crm/nothing', 'application/json', '{bad'],
        ['DELETE', '/api/v1/crm/pipelines', 'application/json', ''],
        ['POST', '/api/v1/crm/nothing', 'application/x-unknown', 'x'],
      ] as const) {
        const answer = await t.request({
          method,
          url,
          key: account.apiKey,
          headers: { 'content-type': contentType },
          payload,
        });
        expect([url, answer.statusCode, answer.json()]).toEqual([url, 404, { error: 'unknown_endpoint' }]);
      }
      const s1Body = await t.request({
        method: 'POST',
        url: '/api/nothing-here',
        key: account.apiKey,
        headers: { 'content-type': 'application/json' },
        payload: '',
      });
      expect(s1Body.statusCode).toBe(404);
      expect(s1Body.json()).toMatchObject({ status: 'error' });
    });

    it('answers a body that is not what it claims with 400 invalid_body, other types with 415', async () => {
      const malformed = await t.request({
        method: 'POST',
        url: '/api/v1/settings/users',
        key: account.apiKey,
        headers: { 'content-type': 'application/json' },
        payload: '{bad',
      });
      expect(malformed.statusCode).toBe(400);
      expect(malformed.json()).toEqual({ error: 'invalid_body' });
      const empty = await t.request({
        method: 'POST',
        url: '/api/v1/settings/users',
        key: account.apiKey,
        headers: { 'content-type': 'application/json' },
        payload: '',
      });
      expect(empty.statusCode).toBe(400);
      const text = await t.request({
        method: 'POST',
        url: '/api/v1/settings/users',
        key: account.apiKey,
        headers: { 'content-type': 'text/plain' },
        payload: 'hello',
      });
      expect(text.statusCode).toBe(415);
    });

    it('guards module routes: 403 module_not_enabled without the module, 200 with it', async () => {
      const without = await t.request({ method: 'GET', url: '/api/v1/crm/pipelines', key: account.apiKey });
      expect(without.statusCode).toBe(403);
      expect(without.json()).toEqual({ error: 'module_not_enabled' });
      const withCrm = await t.createAccount({ modules: ['crm'] });
      expect(
        (await t.request({ method: 'GET', url: '/api/v1/crm/pipelines', key: withCrm.apiKey })).statusCode,
      ).toBe(200);
    });
  });

  describe('access log', () => {
    it('leaves a line for a client that hung up before its answer', async () => {
      const { app, lines } = await appLoggingAtInfo();
      const address = await app.listen({ host: '127.0.0.1', port: 0 });
      const { port } = new URL(address);
      // Half a body, then the connection closes.
      await new Promise<void>((resolve, reject) => {
        const socket = connect(Number(port), '127.0.0.1', () => {
          socket.write(
            'POST /api/v1/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
              `Authorization: Bearer ${account.apiKey}\r\nX-Request-Id: log-abort-1\r\nContent-Length: 500\r\n\r\n{"entity":`,
            () => setTimeout(() => socket.destroy(), 100),
          );
        });
        socket.on('close', () => resolve());
        socket.on('error', reject);
      });
      await expect.poll(() => lines.join(''), { timeout: 5_000 }).toContain('request aborted');
      await app.close();
      const aborted = lines.map((line) => JSON.parse(line)).filter((entry) => entry.reqId === 'log-abort-1');
      expect(aborted[0]).toMatchObject({
        msg: 'request aborted',
        req: { method: 'POST', url: '/api/v1/records' },
      });
    });
  });

  describe('list queries', () => {
    it('refuses a query parameter a list does not take (422 unknown_key), on every list; a link people open takes any', async () => {
      const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json();
      const everything = await t.createAccount({ modules: ['crm', 'distribution', 'booking'] });
      const someId = '00000000-0000-4000-8000-000000000000';
      const lists: string[] = [];
      for (const [path, operations] of Object.entries(doc.paths as Record<string, any>)) {
        const parameters: { in: string; name: string; required?: boolean }[] =
          operations.get?.parameters ?? [];
        const inQuery = parameters.filter((parameter) => parameter.in === 'query');
        if (inQuery.length === 0) continue;
        // Required parameters are given (the slots' booking token), so that only the unknown one fails.
        const given = inQuery.filter((parameter) => parameter.required).map((p) => `${p.name}=bk_unknown&`);
        const url = `${path.replace(/\{[^}]+\}/g, someId)}?${given.join('')}limt=5`;
        const key = path.startsWith('/admin/') ? ADMIN_TOKEN : everything.apiKey;
        const response = await t.app.inject({
          method: 'GET',
          url,
          headers: { authorization: `Bearer ${key}` },
        });
        if (path === '/api/v1/documents/{id}') {
          // A signed document address is a link: what a mail client appends does not break it.
          expect(response.statusCode, path).toBe(404);
          continue;
        }
        lists.push(path);
        expect(response.statusCode, `${path}: ${response.body}`).toBe(422);
        expect(response.json().details, path).toContainEqual(
          expect.objectContaining({ key: 'limt', reason: 'unknown_key' }),
        );
      }
      expect(lists).toEqual(
        expect.arrayContaining([
          '/api/v1/records',
          '/api/v1/distribution/deliveries',
          '/api/v1/intake-log',
          '/api/v1/settings/distributions',
          '/api/v1/settings/return-reasons',
          '/api/v1/distribution/return-reasons',
        ]),
      );
      expect(lists.length).toBeGreaterThanOrEqual(12);
      // Lists that answer everything at once take no parameter, and refuse any all the same.
      for (const path of ['/api/v1/entities', '/api/v1/settings/entities']) {
        const headers = { authorization: `Bearer ${everything.apiKey}` };
        expect((await t.app.inject({ method: 'GET', url: path, headers })).statusCode, path).toBe(200);
        const response = await t.app.inject({ method: 'GET', url: `${path}?limit=5`, headers });
        expect(response.statusCode, `${path}: ${response.body}`).toBe(422);
        expect(response.json().details, path).toContainEqual(
          expect.objectContaining({ key: 'limit', reason: 'unknown_key' }),
        );
      }
    });
  });

  describe('other queries', () => {
    it('refuses a query parameter on every other S2 route (422 unknown_key) before doing anything; a source address takes any', async () => {
      const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json();
      const everything = await accountWithLeads(t, { modules: ['crm', 'distribution', 'booking'] });
      const someId = '00000000-0000-4000-8000-000000000000';
      const refused: string[] = [];
      for (const [path, operations] of Object.entries(doc.paths as Record<string, any>)) {
        if (!path.startsWith('/api/v1/') && !path.startsWith('/admin/v1/')) continue;
        if (path.startsWith('/api/v1/in/')) continue;
        for (const [method, operation] of Object.entries(operations as Record<string, any>)) {
          const parameters: { in: string }[] = operation.parameters ?? [];
          if (parameters.some((parameter) => parameter.in === 'query')) continue;
          // A malformed path parameter is 404 before the query is read: ids and keys are well formed.
          const filled = path.replace(/\{(entity_)?key\}/g, 'lead').replace(/\{[^}]+\}/g, someId);
          const url = `${filled}?stray=1`;
          const key = path.startsWith('/admin/') ? ADMIN_TOKEN : everything.apiKey;
          const response = await t.app.inject({
            method: method.toUpperCase() as 'GET',
            url,
            headers: { authorization: `Bearer ${key}` },
            ...(operation.requestBody ? { payload: {} } : {}),
          });
          const label = `${method.toUpperCase()} ${path}: ${response.body}`;
          expect(response.statusCode, label).toBeGreaterThanOrEqual(400);
          // Credentials are checked first (the session routes take a person's, not a key).
          if (response.statusCode === 401) continue;
          // A body is checked before the query: a route that needs one answers for the body first.
          const details: { key: string; reason: string }[] = response.json().details ?? [];
          if (operation.requestBody && !details.some((detail) => detail.key === 'stray')) continue;
          expect(response.statusCode, label).toBe(422);
          expect(details, label).toContainEqual(
            expect.objectContaining({ key: 'stray', reason: 'unknown_key' }),
          );
          refused.push(`${method.toUpperCase()} ${path}`);
        }
      }
      expect(refused).toEqual(
        expect.arrayContaining([
          'GET /api/v1/records/{id}',
          'DELETE /api/v1/settings/webhooks/{id}',
          'POST /api/v1/settings/webhooks/{id}/test',
          'GET /admin/v1/accounts/{id}',
        ]),
      );
      expect(refused.length).toBeGreaterThanOrEqual(20);

      // Where the body is right, the stray parameter alone refuses the write: nothing is created.
      const lead = { entity: 'lead', fields: { email: 'stray@query.test' } };
      const created = await t.app.inject({
        method: 'POST',
        url: '/api/v1/records?dry_run=true',
        headers: { authorization: `Bearer ${everything.apiKey}` },
        payload: lead,
      });
      expect(created.statusCode, created.body).toBe(422);
      expect(created.json().details).toContainEqual(
        expect.objectContaining({ key: 'dry_run', reason: 'unknown_key' }),
      );
      const records = await t.app.inject({
        method: 'GET',
        url: '/api/v1/records',
        headers: { authorization: `Bearer ${everything.apiKey}` },
      });
      expect(records.json().data ?? records.json().records).toEqual([]);

      // A source's intake address, which a landing page tags, takes any.
      const source = await t.app.inject({
        method: 'POST',
        url: '/api/v1/settings/sources',
        headers: { authorization: `Bearer ${everything.apiKey}` },
        payload: { name: 'Landing page' },
      });
      expect(source.statusCode, source.body).toBe(201);
      const token = source.json().token as string;
      const taken = await t.app.inject({
        method: 'POST',
        url: `/api/v1/in/${token}?utm_source=newsletter`,
        payload: { entity: 'lead', fields: { email: 'tagged@query.test' } },
      });
      expect(taken.statusCode, taken.body).toBe(201);
    });
  });

  describe('documentation', () => {
    it('serves the OpenAPI 3.1 document generated from the routes, and a reference page', async () => {
      // The document itself is not one of the documented operations, so it is fetched directly.
      const response = await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' });
      expect(response.statusCode).toBe(200);
      const doc = response.json();
      expect(doc.openapi).toBe('3.1.0');
      for (const path of [
        '/api/v1/records',
        '/api/v1/entities',
        '/api/intake',
        '/admin/v1/accounts',
        '/api/v1/notes',
      ]) {
        expect(Object.keys(doc.paths), path).toContain(path);
      }
      let page = await t.app.inject({ method: 'GET', url: '/docs' });
      for (let hops = 0; page.statusCode >= 300 && page.statusCode < 400 && hops < 3; hops++) {
        page = await t.app.inject({
          method: 'GET',
          url: new URL(String(page.headers.location), 'http://x/docs/').pathname,
        });
      }
      expect(page.statusCode).toBe(200);
      expect(page.headers['content-type']).toContain('text/html');
    });
  });

  describe('security', () => {
    it('logs each request with its id and never the key or a source token', async () => {
      const { app, lines } = await appLoggingAtInfo();
      await app.inject({
        method: 'GET',
        url: '/api/v1/entities',
        headers: { authorization: `Bearer ${account.apiKey}`, 'x-request-id': 'log-check-1' },
      });
      await app.inject({
        method: 'POST',
        url: '/api/v1/in/st_secretsecretsecretsecret?sig=abc',
        headers: { 'x-request-id': 'log-check-2' },
        payload: { entity: 'lead' },
      });
      await app.close();
      const text = lines.join('');
      expect(text).toContain('log-check-1');
      expect(text).toContain('log-check-2');
      expect(text).not.toContain(account.apiKey);
      expect(text).not.toContain('st_secretsecretsecretsecret');
      for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
      // One access line a request, written when it is answered, with what it was and how it went.
      const access = lines.map((line) => JSON.parse(line)).filter((entry) => entry.reqId === 'log-check-1');
      expect(access).toHaveLength(1);
      expect(access[0]).toMatchObject({
        level: 30,
        msg: 'request completed',
        req: { method: 'GET', url: '/api/v1/entities' },
        res: { statusCode: 200 },
      });
      expect(access[0].responseTime).toBeGreaterThan(0);
      const source = lines.map((line) => JSON.parse(line)).filter((entry) => entry.reqId === 'log-check-2');
      expect(lines.some((line) => line.includes('request aborted'))).toBe(false);
      expect(source).toHaveLength(1);
      expect(source[0].req.url).toBe('/api/v1/in/[redacted]?sig=[redacted]');
    });

    it('redacts a key, token or password sent in the query string, and keeps other values', async () => {
      const { app, lines } = await appLoggingAtInfo();
      const secrets = {
        access_token: account.apiKey,
        APIKEY: 'apikey-secret-1',
        'api-key': 'api-key-secret-2',
        password: 'password-secret-3',
        secret: 'secret-secret-4',
        api_key: 'api-key-secret-5',
      };
      const query = new URLSearchParams({ limit: '5', ...secrets }).toString();
      await app.inject({
        method: 'GET',
        url: `/api/v1/entities?${query}`,
        headers: { 'x-request-id': 'log-check-3' },
      });
      await app.close();
      const text = lines.join('');
      for (const value of Object.values(secrets)) expect(text).not.toContain(value);
      const entry = lines.map((line) => JSON.parse(line)).find((line) => line.reqId === 'log-check-3');
      expect(entry.req.url).toBe(
        `/api/v1/entities?limit=5${Object.keys(secrets)
          .map((name) => `&${name}=[redacted]`)
          .join('')}`,
      );
    });
  });
});

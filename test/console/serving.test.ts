import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_DIST } from '../../src/modules/console/console.routes.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';

const HTML = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

describe.each(TEST_DATABASES)('serving the web console on %s', (kind) => {
  let t: TestApp;
  let index: string;
  let script: string;
  beforeAll(async () => {
    t = await startTestApp(kind);
    index = await readFile(path.join(CONSOLE_DIST, 'index.html'), 'utf8');
    script = (await readdir(path.join(CONSOLE_DIST, 'assets'))).find((name) => name.endsWith('.js'))!;
  });
  afterAll(async () => t?.close());

  const get = (url: string, accept?: string, method: 'GET' | 'HEAD' | 'POST' = 'GET') =>
    t.app.inject({ method, url, headers: accept ? { accept } : {} });

  describe('happy path', () => {
    it('answers / with index.html, never from a cache, with a policy that allows only its own scripts', async () => {
      for (const accept of [HTML, undefined, 'application/json']) {
        const response = await get('/', accept);
        expect(response.statusCode).toBe(200);
        expect(response.headers['content-type']).toBe('text/html; charset=utf-8');
        expect(response.headers['cache-control']).toBe('no-cache');
        expect(response.body).toBe(index);
      }
      const page = await get('/');
      const csp = String(page.headers['content-security-policy']);
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(page.headers['x-content-type-options']).toBe('nosniff');
      expect(index).toMatch(/<script type="module" crossorigin src="\/assets\/index-[\w-]+\.js"><\/script>/);
    });

    it('answers the console addresses a browser opens (client routes) with index.html, GET and HEAD', async () => {
      for (const url of [
        '/records',
        '/records/1b7e6a7c-3c43-4e39-8a0d-9f8f3c1d2e4f',
        '/login?next=%2F',
        '/password',
      ]) {
        const response = await get(url, HTML);
        expect(response.statusCode, url).toBe(200);
        expect(response.body, url).toBe(index);
        expect(response.headers['cache-control'], url).toBe('no-cache');
      }
      const head = await get('/records', HTML, 'HEAD');
      expect(head.statusCode).toBe(200);
      expect(head.headers['content-type']).toBe('text/html; charset=utf-8');
    });

    it('serves the hashed assets with a year of immutable caching', async () => {
      const response = await get(`/assets/${script}`);
      expect(response.statusCode).toBe(200);
      expect(response.headers['content-type']).toMatch(/^text\/javascript|^application\/javascript/);
      expect(response.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(response.body).toBe(await readFile(path.join(CONSOLE_DIST, 'assets', script), 'utf8'));
    });

    it('sends the assets compressed to a browser that accepts Brotli or gzip, the same bytes decoded', async () => {
      const built = await readFile(path.join(CONSOLE_DIST, 'assets', script));
      const asset = (acceptEncoding?: string) =>
        t.app.inject({
          method: 'GET',
          url: `/assets/${script}`,
          headers: acceptEncoding ? { 'accept-encoding': acceptEncoding } : {},
        });
      const brotli = await asset('gzip, deflate, br, zstd');
      expect(brotli.statusCode).toBe(200);
      expect(brotli.headers['content-encoding']).toBe('br');
      expect(brotli.headers['content-type']).toMatch(/^text\/javascript|^application\/javascript/);
      expect(brotli.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(String(brotli.headers.vary)).toMatch(/accept-encoding/i);
      expect(brotli.rawPayload.length).toBeLessThan(built.length / 3);
      expect(brotliDecompressSync(brotli.rawPayload).equals(built)).toBe(true);
      const gzipped = await asset('gzip');
      expect(gzipped.headers['content-encoding']).toBe('gzip');
      expect(gunzipSync(gzipped.rawPayload).equals(built)).toBe(true);
      const plain = await asset();
      expect(plain.headers['content-encoding']).toBeUndefined();
      expect(plain.rawPayload.equals(built)).toBe(true);
    });

    it('is React’s production build, also when the test run (NODE_ENV=test) built it', async () => {
      const built = await readFile(path.join(CONSOLE_DIST, 'assets', script), 'utf8');
      // A warning only React's development build carries.
      expect(built).not.toContain('is using incorrect casing');
    });
  });

  describe('errors', () => {
    it('keeps the JSON 404 for unknown API addresses, even for a browser', async () => {
      for (const url of ['/api/v1/nothing-here', '/api/v1', '/admin/v1/nothing', '/health/x']) {
        const response = await get(url, HTML);
        expect(response.statusCode, url).toBe(404);
        expect(response.headers['content-type'], url).toBe('application/json; charset=utf-8');
        expect(response.json().error, url).toBe('unknown_endpoint');
      }
      const s1 = await get('/api/nothing', HTML);
      expect(s1.statusCode).toBe(404);
      expect(s1.json()).toMatchObject({ status: 'error' });
    });

    it('leaves the service prefixes (docs, booking, sign-in links) to the service', async () => {
      for (const url of ['/docs/nothing', '/book/unknown-token-1', '/sign-in/x', '/assets/none.js']) {
        const response = await get(url, HTML);
        expect(response.statusCode, url).toBeGreaterThanOrEqual(400);
        expect(response.body, url).not.toBe(index);
      }
    });

    it('answers JSON 404 to clients that do not ask for HTML, and to other methods', async () => {
      const plain = await get('/records', 'application/json');
      expect(plain.statusCode).toBe(404);
      expect(plain.json().error).toBe('unknown_endpoint');
      const anyType = await get('/records', '*/*');
      expect(anyType.statusCode).toBe(404);
      const post = await get('/records', HTML, 'POST');
      expect(post.statusCode).toBe(404);
      expect(post.json().error).toBe('unknown_endpoint');
    });

    it('says how to build the console when console/dist is missing', async () => {
      const empty = await mkdtemp(path.join(os.tmpdir(), 'leads-console-'));
      const bare = await startTestApp(kind, { consoleDir: empty });
      try {
        const response = await bare.app.inject({ method: 'GET', url: '/', headers: { accept: HTML } });
        expect(response.statusCode).toBe(503);
        expect(response.body).toContain('npm start');
        const api = await bare.app.inject({ method: 'GET', url: '/api/v1/nothing' });
        expect(api.statusCode).toBe(404);
      } finally {
        await bare.close();
        await rm(empty, { recursive: true, force: true });
      }
    });
  });

  describe('security', () => {
    it('serves nothing outside console/dist/assets (traversal, dotfiles, the build stamp)', async () => {
      for (const url of [
        '/assets/../index.html',
        '/assets/%2e%2e/index.html',
        '/assets/..%2f.sources-hash',
        '/assets/../../package.json',
        '/.sources-hash',
      ]) {
        const response = await get(url);
        expect(response.statusCode, url).toBe(404);
        expect(response.body, url).not.toContain('"name": "leadline"');
      }
    });

    it('does not let a console address carry a framing or a sniffed type', async () => {
      const response = await get('/records', HTML);
      expect(response.headers['x-frame-options']).toBe('DENY');
      expect(response.headers['x-content-type-options']).toBe('nosniff');
    });
  });
});

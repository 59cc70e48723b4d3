import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { deflateSync } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDocumentFetcher } from '../../src/modules/documents/documents.fetch.ts';
import { createAddressPolicy, isPublicAddress, type Resolver } from '../../src/outbound/address-policy.ts';
import { createGuardedFetcher } from '../../src/outbound/guarded-fetch.ts';
import { createDirectoryStorage } from '../../src/storage/directory-storage.ts';
import type { FileStorage } from '../../src/storage/storage.ts';

/** A 1×1 PNG, built here so that the bytes are known. */
function tinyPng(): Buffer {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf: Buffer) => {
    let c = 0xffffffff;
    for (const byte of buf) c = crcTable[(c ^ byte) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type), data]);
    const out = Buffer.alloc(8 + data.length + 4);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc(body), 8 + data.length);
    return out;
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(1, 0);
  ihdr.writeUInt32BE(1, 4);
  ihdr[8] = 8;
  ihdr[9] = 2;
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(Buffer.from([0, 255, 0, 0]))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

const PDF = Buffer.from('%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n');
const PNG = tinyPng();
const TEXT = Buffer.from('Grüße aus dem Test\n');

/** The account the fetched files belong to (the directory keeps every account's alike). */
const ACCOUNT = '00000000-0000-4000-8000-000000000001';

/** A document fetcher that fetches for ACCOUNT. */
function fetcherFor(deps: Parameters<typeof createDocumentFetcher>[0]) {
  const fetchDocument = createDocumentFetcher(deps);
  return (url: string) => fetchDocument(ACCOUNT, url);
}

describe('guarded fetcher and document download', () => {
  let server: http.Server;
  let port: number;
  let hits: string[];
  let connections = 0;
  let filesDir: string;

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      hits.push(req.url ?? '');
      const url = req.url ?? '/';
      if (url === '/files/offer.pdf') return res.writeHead(200, { 'content-type': 'image/gif' }).end(PDF);
      if (url === '/files/photo') return res.writeHead(200, { 'content-type': 'text/html' }).end(PNG);
      if (url === '/download') {
        return res
          .writeHead(200, {
            'content-type': 'application/octet-stream',
            'content-disposition': 'attachment; filename="../../notes.txt"',
          })
          .end(TEXT);
      }
      if (url === '/big-announced')
        return res.writeHead(200, { 'content-length': '5000' }).end(Buffer.alloc(5000));
      if (url === '/big-chunked') {
        res.writeHead(200);
        for (let i = 0; i < 10; i++) res.write(Buffer.alloc(1000));
        return res.end();
      }
      if (url === '/stall') {
        res.writeHead(200);
        res.write('partial');
        return; // never ends
      }
      if (url === '/missing') return res.writeHead(404).end('no');
      if (url === '/drop') {
        res.writeHead(200, { 'content-length': '10000' });
        res.write(Buffer.alloc(1000));
        setTimeout(() => res.socket?.destroy(), 20);
        return;
      }
      if (url.startsWith('/hop/')) {
        const n = Number(url.slice(5));
        return res.writeHead(302, { location: `/hop/${n + 1}` }).end();
      }
      if (url === '/to-loopback')
        return res.writeHead(302, { location: `http://127.0.0.2:${port}/files/offer.pdf` }).end();
      res.writeHead(200).end('ok');
    });
    server.on('connection', () => connections++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    filesDir = await mkdtemp(path.join(os.tmpdir(), 'leads-fetch-'));
  });
  beforeEach(() => {
    hits = [];
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await rm(filesDir, { recursive: true, force: true });
  });

  const storage = () => createDirectoryStorage(filesDir);
  const permissive = (limits: { maxBytes?: number; timeoutMs?: number } = {}) =>
    fetcherFor({
      fetcher: createGuardedFetcher({ allowPrivate: true, timeoutMs: limits.timeoutMs ?? 5_000 }),
      storage: storage(),
      maxBytes: limits.maxBytes ?? 1024 * 1024,
    });
  const strict = (resolve?: Resolver) =>
    fetcherFor({
      fetcher: createGuardedFetcher({ allowPrivate: false, resolve }),
      storage: storage(),
    });

  describe('happy path', () => {
    it('stores PDF, PNG and text byte-identical with the type sniffed from the bytes', async () => {
      const fetch = permissive();
      const cases = [
        ['/files/offer.pdf', PDF, 'application/pdf', 'offer.pdf'],
        ['/files/photo', PNG, 'image/png', 'photo'],
        ['/download', TEXT, 'text/plain', 'notes.txt'],
      ] as const;
      for (const [url, bytes, mime, name] of cases) {
        const result = await fetch(`http://127.0.0.1:${port}${url}`);
        expect(result.ok, url).toBe(true);
        if (!result.ok) continue;
        expect(result.document.mime).toBe(mime);
        expect(result.document.name).toBe(name);
        expect(result.document.size).toBe(bytes.length);
        const stored = await readFile(path.join(filesDir, result.document.storageKey));
        expect(stored.equals(bytes)).toBe(true);
      }
    });

    it('follows up to three redirects', async () => {
      const result = await permissive()(`http://127.0.0.1:${port}/hop/0`.replace('/hop/0', '/hop/97'));
      // /hop/97 → 98 → 99 → 100 → … never ends, so more than three: refused.
      expect(result).toEqual({ ok: false, reason: 'too_many_redirects' });
      expect(hits).toHaveLength(4);
    });
  });

  describe('errors', () => {
    it('aborts documents over the size limit, announced or not, and leaves no temporary file', async () => {
      const fetch = permissive({ maxBytes: 2000 });
      expect(await fetch(`http://127.0.0.1:${port}/big-announced`)).toEqual({
        ok: false,
        reason: 'too_large',
      });
      expect(await fetch(`http://127.0.0.1:${port}/big-chunked`)).toEqual({ ok: false, reason: 'too_large' });
      expect(await readdir(path.join(filesDir, 'tmp')).catch(() => [])).toEqual([]);
    });

    it('tells a store that fails from a download that fails, and says so to the operator', async () => {
      const failures: unknown[] = [];
      const failingStore: FileStorage = {
        ...storage(),
        async put(_accountId, source) {
          for await (const _chunk of source) {
            // The whole download arrives; the store then cannot keep it.
          }
          throw Object.assign(new Error('bucket unavailable'), { code: 'ServiceUnavailable' });
        },
      };
      const fetch = fetcherFor({
        fetcher: createGuardedFetcher({ allowPrivate: true, timeoutMs: 5_000 }),
        storage: failingStore,
        onStorageError: (error) => failures.push(error),
      });
      expect(await fetch(`http://127.0.0.1:${port}/files/offer.pdf`)).toEqual({
        ok: false,
        reason: 'storage_error',
      });
      expect(failures).toEqual([expect.objectContaining({ message: 'bucket unavailable' })]);
      // A download cut off half-way is the sender's side, whatever the store does with it.
      const dropped = await fetcherFor({
        fetcher: createGuardedFetcher({ allowPrivate: true, timeoutMs: 5_000 }),
        storage: storage(),
        onStorageError: (error) => failures.push(error),
      })(`http://127.0.0.1:${port}/drop`);
      expect(dropped).toEqual({ ok: false, reason: 'network_error' });
      expect(failures).toHaveLength(1);
    });

    it('aborts a server that stalls', async () => {
      const started = Date.now();
      expect(await permissive({ timeoutMs: 300 })(`http://127.0.0.1:${port}/stall`)).toEqual({
        ok: false,
        reason: 'timeout',
      });
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(await readdir(path.join(filesDir, 'tmp')).catch(() => [])).toEqual([]);
    });

    it('reports the status of a failed download', async () => {
      expect(await permissive()(`http://127.0.0.1:${port}/missing`)).toEqual({
        ok: false,
        reason: 'http_404',
      });
    });
  });

  describe('security', () => {
    it('refuses private, loopback, link-local and encoded addresses before connecting', async () => {
      const fetch = strict();
      const targets = [
        `http://127.0.0.1:${port}/`,
        `http://localhost:${port}/`,
        `http://[::1]:${port}/`,
        `http://[::ffff:127.0.0.1]:${port}/`,
        `http://[::ffff:7f00:1]:${port}/`,
        'http://169.254.169.254/latest/meta-data/',
        'http://[fd00:ec2::254]/',
        'http://10.0.0.1/',
        'http://192.168.1.1/',
        'http://172.16.0.1/',
        'http://100.64.0.1/',
        'http://0.0.0.0/',
        `http://2130706433:${port}/`,
        `http://0x7f.0.0.1:${port}/`,
        `http://017700000001:${port}/`,
        `http://0x7f.1:${port}/`,
        'http://[64:ff9b::7f00:1]/',
        'http://[2002:7f00:1::]/',
      ];
      for (const target of targets) {
        expect(await fetch(target), target).toEqual({ ok: false, reason: 'blocked_address' });
      }
      expect(hits).toEqual([]);
    });

    it('refuses other schemes', async () => {
      const fetch = strict();
      for (const target of [
        'file:///etc/passwd',
        'ftp://example.com/x',
        'gopher://example.com/',
        'data:text/plain,hi',
      ]) {
        expect(await fetch(target), target).toEqual({ ok: false, reason: 'unsupported_scheme' });
      }
    });

    it('checks the resolved address of a host name, so a public-looking name cannot reach loopback', async () => {
      const evilDns: Resolver = async () => [{ address: '127.0.0.1', family: 4 }];
      expect(await strict(evilDns)(`http://evil.example:${port}/files/offer.pdf`)).toEqual({
        ok: false,
        reason: 'blocked_address',
      });
      const mixedDns: Resolver = async () => [
        { address: '93.184.216.34', family: 4 },
        { address: '10.0.0.7', family: 4 },
      ];
      expect(await strict(mixedDns)('http://mixed.example/')).toEqual({
        ok: false,
        reason: 'blocked_address',
      });
      expect(hits).toEqual([]);
    });

    it('pins the connection to the checked address whatever the name resolves to later', async () => {
      // The name resolves to the test server; the policy lets exactly that address and port through.
      const policy = { allows: (address: string, p: number) => address === '127.0.0.1' && p === port };
      const fetch = fetcherFor({
        fetcher: createGuardedFetcher({
          allowPrivate: false,
          policy,
          resolve: async () => [{ address: '127.0.0.1', family: 4 }],
        }),
        storage: storage(),
      });
      const result = await fetch(`http://files.example:${port}/files/offer.pdf`);
      expect(result.ok).toBe(true);
      expect(hits).toEqual(['/files/offer.pdf']);
    });

    it('reuses a connection only to the address it checked, and checks the address on every request', async () => {
      let allowed = true;
      let resolvesTo = '127.0.0.1';
      const fetcher = createGuardedFetcher({
        allowPrivate: false,
        policy: { allows: (address, p) => allowed && address.startsWith('127.0.0.') && p === port },
        resolve: async () => [{ address: resolvesTo, family: 4 }],
        reuseConnections: 1,
      });
      try {
        const before = connections;
        for (let i = 0; i < 3; i++) {
          const answer = await fetcher.request(`http://hooks.example:${port}/ok`, {
            method: 'POST',
            body: '{}',
          });
          expect(answer).toMatchObject({ status: 200, body: 'ok' });
        }
        expect(connections - before).toBe(1);

        allowed = false;
        await expect(
          fetcher.request(`http://hooks.example:${port}/ok`, { method: 'POST' }),
        ).rejects.toMatchObject({
          reason: 'blocked_address',
        });
        // The name now points elsewhere (nothing listens there): the open connection to the old
        // address is not used for it.
        allowed = true;
        resolvesTo = '127.0.0.2';
        await expect(
          fetcher.request(`http://hooks.example:${port}/ok`, { method: 'POST' }),
        ).rejects.toMatchObject({
          reason: 'network_error',
        });
        expect(hits).toEqual(['/ok', '/ok', '/ok']);
      } finally {
        await fetcher.close();
      }
    });

    it('re-checks every redirect: an allowed server cannot send the fetch to loopback', async () => {
      const policy = { allows: (address: string, p: number) => address === '127.0.0.1' && p === port };
      const fetch = fetcherFor({
        fetcher: createGuardedFetcher({ allowPrivate: false, policy }),
        storage: storage(),
      });
      expect(await fetch(`http://127.0.0.1:${port}/to-loopback`)).toEqual({
        ok: false,
        reason: 'blocked_address',
      });
      // Only the redirecting server was asked; the loopback target 127.0.0.2 saw nothing.
      expect(hits).toEqual(['/to-loopback']);
    });

    it('classifies addresses', () => {
      expect(isPublicAddress('93.184.216.34')).toBe(true);
      expect(isPublicAddress('2606:2800:220:1:248:1893:25c8:1946')).toBe(true);
      for (const address of [
        '127.0.0.1',
        '::1',
        '::ffff:10.0.0.1',
        'fe80::1',
        'fc00::1',
        '224.0.0.1',
        '::',
        '100.100.0.1',
      ]) {
        expect(isPublicAddress(address), address).toBe(false);
      }
      expect(createAddressPolicy(true).allows('127.0.0.1', 80)).toBe(true);
    });
  });
});

import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHUNK_BYTES, createDatabaseStorage } from '../../src/storage/database-storage.ts';
import { createDirectoryStorage } from '../../src/storage/directory-storage.ts';
import { createS3Storage, type S3Settings } from '../../src/storage/s3-storage.ts';
import { createSpool, type FileStorage, HEAD_BYTES, TooLargeError } from '../../src/storage/storage.ts';
import { createTestDatabase, TEST_DATABASES } from '../helpers/databases.ts';
import { startTestS3, type TestS3 } from '../helpers/s3.ts';

/** One store under test, with two accounts and a way to count what it holds. */
interface Store {
  storage: FileStorage;
  accounts: [string, string];
  /** Everything it holds, temporary files and chunks included. */
  held(): Promise<number>;
  /** The sizes of the files it keeps while it reads a source (stores that write in one go). */
  spooled?(): Promise<number[]>;
  close(): Promise<void>;
}

interface Backend {
  name: string;
  /** Whether the store itself keeps accounts apart (the directory leaves that to the document rows). */
  accountsApart: boolean;
  /** Whether it keeps a source in a temporary file before it writes it in one go. */
  spools: boolean;
  start(): Promise<Store>;
}

const BACKENDS: Backend[] = [
  {
    name: 'directory',
    accountsApart: false,
    spools: false,
    async start() {
      const root = await mkdtemp(path.join(os.tmpdir(), 'leads-contract-'));
      return {
        storage: createDirectoryStorage(root),
        accounts: [randomUUID(), randomUUID()],
        held: async () =>
          (await readdir(root, { recursive: true, withFileTypes: true })).filter((entry) => entry.isFile())
            .length,
        close: () => rm(root, { recursive: true, force: true }),
      };
    },
  },
  ...TEST_DATABASES.map(
    (kind): Backend => ({
      name: `database on ${kind}`,
      accountsApart: true,
      spools: true,
      async start() {
        const database = await createTestDatabase(kind);
        const db = database.handle.db;
        const accounts: [string, string] = [randomUUID(), randomUUID()];
        for (const id of accounts)
          await db.insertInto('accounts').values({ id, name: 'Files', modules: [] }).execute();
        const spool = await mkdtemp(path.join(os.tmpdir(), 'leads-spool-'));
        return {
          storage: createDatabaseStorage(db, { spoolDir: spool }),
          accounts,
          held: async () =>
            Number(
              (
                await db
                  .selectFrom('document_file_chunks')
                  .select((eb) => eb.fn.countAll<string>().as('n'))
                  .executeTakeFirstOrThrow()
              ).n,
            ) + (await spooledSizes(spool)).length,
          spooled: () => spooledSizes(spool),
          close: async () => {
            await database.drop();
            await rm(spool, { recursive: true, force: true });
          },
        };
      },
    }),
  ),
  {
    name: 's3',
    accountsApart: true,
    spools: true,
    async start() {
      const s3 = await startTestS3({ prefix: 'leadline/' });
      const spool = await mkdtemp(path.join(os.tmpdir(), 'leads-spool-'));
      return {
        storage: createS3Storage(s3.settings, { spoolDir: spool }),
        accounts: [randomUUID(), randomUUID()],
        held: async () => (await s3.objectNames()).length + (await spooledSizes(spool)).length,
        spooled: () => spooledSizes(spool),
        close: async () => {
          await s3.close();
          await rm(spool, { recursive: true, force: true });
        },
      };
    },
  },
];

/** The sizes of the files in a spool directory. */
async function spooledSizes(dir: string): Promise<number[]> {
  const names = await readdir(dir);
  return Promise.all(names.map(async (name) => (await stat(path.join(dir, name))).size));
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** The bytes as a stream of pieces of `size`. */
const streamOf = (bytes: Buffer, size = 10_000) =>
  Readable.from(
    Array.from({ length: Math.ceil(bytes.length / size) }, (_, i) =>
      bytes.subarray(i * size, (i + 1) * size),
    ),
  );

describe.each(BACKENDS)('file storage: $name', ({ accountsApart, spools, start }) => {
  let store: Store;
  let account: string;
  beforeAll(async () => {
    store = await start();
    account = store.accounts[0];
  });
  afterAll(() => store?.close());

  const read = async (key: string, owner = account) => buffer(await store.storage.open(owner, key));

  describe('happy path', () => {
    it('stores the bytes under a new key with their size, SHA-256 and first bytes, and opens them byte-identical', async () => {
      const stored = await store.storage.put(
        account,
        Readable.from([Buffer.from('hello '), Buffer.from('world')]),
        {
          maxBytes: 100,
        },
      );
      expect(stored).toEqual({
        key: expect.stringMatching(/^[0-9a-f]{2}\/[0-9a-f-]{36}$/),
        size: 11,
        sha256: 'b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9',
        head: Buffer.from('hello world'),
      });
      expect((await read(stored.key)).toString()).toBe('hello world');
    });

    it('keeps a file of several chunks whole, at exactly its limit, and hands back only its first 64 KiB', async () => {
      const bytes = randomBytes(2 * CHUNK_BYTES + 12_345);
      const stored = await store.storage.put(account, streamOf(bytes, 65_000), { maxBytes: bytes.length });
      expect(stored.size).toBe(bytes.length);
      expect(stored.sha256).toBe(sha256(bytes));
      expect(stored.head.equals(bytes.subarray(0, HEAD_BYTES))).toBe(true);
      expect((await read(stored.key)).equals(bytes)).toBe(true);
    });

    it.runIf(spools)(
      'keeps what it has read of a source in a file while it reads, not in memory, and removes the file after',
      async () => {
        const source = new Readable({ read() {} });
        const first = randomBytes(100_000);
        source.push(first);
        const put = store.storage.put(account, source, { maxBytes: 1_000_000 });
        await expect.poll(() => store.spooled!()).toEqual([first.length]);
        const rest = randomBytes(300_000);
        source.push(rest);
        source.push(null);
        const stored = await put;
        expect(await store.spooled!()).toEqual([]);
        expect((await read(stored.key)).equals(Buffer.concat([first, rest]))).toBe(true);
      },
    );

    it('stores an empty file', async () => {
      const stored = await store.storage.put(account, Readable.from([]), { maxBytes: 10 });
      expect(stored).toMatchObject({ size: 0, sha256: sha256(Buffer.alloc(0)), head: Buffer.alloc(0) });
      expect((await read(stored.key)).length).toBe(0);
    });

    it('removes a file; removing it again is no error, opening it is', async () => {
      const stored = await store.storage.put(account, Readable.from([Buffer.from('short-lived')]), {
        maxBytes: 100,
      });
      const before = await store.held();
      await store.storage.remove(account, stored.key);
      expect(await store.held()).toBeLessThan(before);
      await store.storage.remove(account, stored.key);
      await expect(store.storage.open(account, stored.key)).rejects.toMatchObject({ code: 'ENOENT' });
    });
  });

  describe('errors', () => {
    it('refuses a file past its limit while it streams, and keeps nothing of it', async () => {
      const before = await store.held();
      let pulled = 0;
      const endless = new Readable({
        highWaterMark: 1024,
        read() {
          pulled++;
          this.push(Buffer.alloc(1000, 1));
        },
      });
      await expect(store.storage.put(account, endless, { maxBytes: 2500 })).rejects.toBeInstanceOf(
        TooLargeError,
      );
      expect(pulled).toBeLessThan(10);
      expect(await store.held()).toBe(before);
    });

    it('stops when aborted, and keeps nothing', async () => {
      const before = await store.held();
      const stalled = new Readable({ read() {} });
      stalled.push(Buffer.from('the first bytes, then nothing'));
      const abort = new AbortController();
      const put = store.storage.put(account, stalled, { maxBytes: 1000, signal: abort.signal });
      setTimeout(() => abort.abort(), 50);
      await expect(put).rejects.toMatchObject({ name: 'AbortError' });
      expect(await store.held()).toBe(before);
    });

    it('fails with its source, and keeps nothing', async () => {
      const before = await store.held();
      let sent = false;
      const failing = new Readable({
        read() {
          if (sent) return this.destroy(new Error('source failed'));
          sent = true;
          this.push(Buffer.alloc(500));
        },
      });
      await expect(store.storage.put(account, failing, { maxBytes: 10_000 })).rejects.toThrow(
        'source failed',
      );
      expect(await store.held()).toBe(before);
    });

    it('has nothing under a key it never gave', async () => {
      await expect(store.storage.open(account, `ab/ab${randomUUID().slice(2)}`)).rejects.toMatchObject({
        code: 'ENOENT',
      });
    });
  });

  describe('security', () => {
    it('accepts only keys it makes, so that none reaches outside its place', async () => {
      for (const key of ['../../etc/passwd', 'ab/../../x', '/etc/passwd', 'ab', `AB/${randomUUID()}`, '']) {
        await expect(store.storage.open(account, key), key).rejects.toThrow('not a storage key');
        await expect(store.storage.remove(account, key), key).rejects.toThrow('not a storage key');
      }
    });

    it.runIf(accountsApart)(
      'keeps accounts apart: one account can neither read nor remove another’s file',
      async () => {
        const [owner, other] = store.accounts;
        const stored = await store.storage.put(owner, Readable.from([Buffer.from('private')]), {
          maxBytes: 100,
        });
        await expect(store.storage.open(other, stored.key)).rejects.toMatchObject({ code: 'ENOENT' });
        await store.storage.remove(other, stored.key);
        expect((await read(stored.key, owner)).toString()).toBe('private');
      },
    );
  });
});

describe('spool', () => {
  it('removes files a stopped process left (older than an hour), and no others, at most once an hour', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'leads-spool-'));
    try {
      const HOUR = 60 * 60 * 1000;
      let now = Date.now();
      const spool = createSpool(dir, () => now);
      const fileAged = async (ageMs: number) => {
        const file = path.join(dir, randomUUID());
        await writeFile(file, 'left by a process that stopped, or being read by another');
        const at = new Date(now - ageMs);
        await utimes(file, at, at);
        return path.basename(file);
      };
      const names = async () => (await readdir(dir)).sort();
      const leftover = await fileAged(2 * HOUR);
      const recent = await fileAged(60_000);
      const first = await spool(Readable.from([Buffer.from('new')]), { maxBytes: 10 });
      expect(await names()).toEqual([recent, path.basename(first.path)].sort());
      expect(await names()).not.toContain(leftover);
      await first.discard();
      // Within the hour no second look: a file that is old by now stays until the next one.
      now += HOUR / 2;
      const later = await fileAged(2 * HOUR);
      const second = await spool(Readable.from([Buffer.from('new')]), { maxBytes: 10 });
      await second.discard();
      expect(await names()).toEqual([recent, later].sort());
      now += HOUR / 2;
      const fresh = await fileAged(0);
      const third = await spool(Readable.from([Buffer.from('new')]), { maxBytes: 10 });
      await third.discard();
      // An hour on, the file of a minute then is old too.
      expect(await names()).toEqual([fresh]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('database storage', () => {
  it('keeps a file in 256 KiB chunks, numbered in order', async () => {
    const database = await createTestDatabase(TEST_DATABASES[0]!);
    try {
      const db = database.handle.db;
      const account = randomUUID();
      await db.insertInto('accounts').values({ id: account, name: 'Chunks', modules: [] }).execute();
      const bytes = randomBytes(2 * CHUNK_BYTES + 1);
      const stored = await createDatabaseStorage(db).put(account, streamOf(bytes), {
        maxBytes: bytes.length,
      });
      const rows = await db
        .selectFrom('document_file_chunks')
        .select(['seq', (eb) => eb.fn<number>('length', ['bytes']).as('length')])
        .where('account_id', '=', account)
        .where('key', '=', stored.key)
        .orderBy('seq')
        .execute();
      expect(rows).toEqual([
        { seq: 0, length: CHUNK_BYTES },
        { seq: 1, length: CHUNK_BYTES },
        { seq: 2, length: 1 },
      ]);
    } finally {
      await database.drop();
    }
  });
});

/**
 * A real HTTP server in front of the test S3 that answers the first `failures` PUTs with 503
 * (after reading their bodies) and passes everything else on; it counts the PUTs and their bytes.
 */
async function startFlakyS3Proxy(target: string, failures: number) {
  const puts: number[] = [];
  let left = failures;
  const server = http.createServer(async (request, response) => {
    if (request.method === 'PUT') {
      const body = await buffer(request);
      puts.push(body.length);
      if (left > 0) {
        left--;
        response.writeHead(503, { 'content-type': 'application/xml' });
        response.end('<Error><Code>ServiceUnavailable</Code><Message>Try again</Message></Error>');
        return;
      }
      const forwarded = http.request(`${target}${request.url}`, { method: 'PUT', headers: request.headers });
      forwarded.on('response', (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      });
      forwarded.end(body);
      return;
    }
    const forwarded = http.request(`${target}${request.url}`, {
      method: request.method,
      headers: request.headers,
    });
    forwarded.on('response', (answer) => {
      response.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(response);
    });
    request.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    puts,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('S3 storage', () => {
  /** A store in a test S3 behind the flaky proxy, with a spool of its own; all removed after `run`. */
  async function withFlakyS3(
    failures: number,
    run: (context: {
      s3: TestS3;
      proxy: Awaited<ReturnType<typeof startFlakyS3Proxy>>;
      spool: string;
      settings: S3Settings;
    }) => Promise<void>,
  ) {
    const s3 = await startTestS3();
    const proxy = await startFlakyS3Proxy(s3.endpoint, failures);
    const spool = await mkdtemp(path.join(os.tmpdir(), 'leads-spool-'));
    try {
      await run({ s3, proxy, spool, settings: { ...s3.settings, endpoint: proxy.endpoint } });
    } finally {
      await proxy.close();
      await s3.close();
      await rm(spool, { recursive: true, force: true });
    }
  }

  it('sends a put again after a server error, streaming the whole file each time', () =>
    withFlakyS3(2, async ({ s3, proxy, spool, settings }) => {
      const storage = createS3Storage(settings, { spoolDir: spool, retryDelayMs: 10 });
      const bytes = randomBytes(300_000);
      const account = randomUUID();
      const stored = await storage.put(account, streamOf(bytes), { maxBytes: bytes.length });
      expect(proxy.puts).toEqual([bytes.length, bytes.length, bytes.length]);
      expect((await s3.objectBytes(`${account}/${stored.key}`)).equals(bytes)).toBe(true);
      expect(await readdir(spool)).toEqual([]);
    }));

  it('gives up after three attempts with the last error, and leaves neither object nor file', () =>
    withFlakyS3(3, async ({ s3, proxy, spool, settings }) => {
      const storage = createS3Storage(settings, { spoolDir: spool, retryDelayMs: 10 });
      await expect(
        storage.put(randomUUID(), Readable.from([Buffer.from('never kept')]), { maxBytes: 100 }),
      ).rejects.toMatchObject({ $metadata: { httpStatusCode: 503 } });
      expect(proxy.puts).toEqual([10, 10, 10]);
      expect(await s3.objectNames()).toEqual([]);
      expect(await readdir(spool)).toEqual([]);
    }));

  it('does not send again a put the server refused for the request itself (4xx)', () =>
    withFlakyS3(0, async ({ proxy, spool, settings }) => {
      const storage = createS3Storage(
        { ...settings, accessKeyId: 'NOT-A-KEY', secretAccessKey: 'wrong' },
        { spoolDir: spool, retryDelayMs: 10 },
      );
      await expect(
        storage.put(randomUUID(), Readable.from([Buffer.from('refused')]), { maxBytes: 100 }),
      ).rejects.toMatchObject({ name: 'InvalidAccessKeyId' });
      expect(proxy.puts).toEqual([7]);
    }));

  it('names each object after its account under the prefix', async () => {
    const s3 = await startTestS3({ prefix: 'files/leadline/' });
    try {
      const account = randomUUID();
      const stored = await createS3Storage(s3.settings).put(account, Readable.from([Buffer.from('named')]), {
        maxBytes: 100,
      });
      expect(await s3.objectNames()).toEqual([`files/leadline/${account}/${stored.key}`]);
      expect((await s3.objectBytes(`files/leadline/${account}/${stored.key}`)).toString()).toBe('named');
    } finally {
      await s3.close();
    }
  });

  it('fails a put the server refuses (an unknown access key), and leaves no object', async () => {
    const s3 = await startTestS3();
    try {
      const storage = createS3Storage({ ...s3.settings, accessKeyId: 'NOT-A-KEY', secretAccessKey: 'wrong' });
      await expect(
        storage.put(randomUUID(), Readable.from([Buffer.from('refused')]), { maxBytes: 100 }),
      ).rejects.toMatchObject({ name: 'InvalidAccessKeyId' });
      expect(await s3.objectNames()).toEqual([]);
    } finally {
      await s3.close();
    }
  });

  it('refuses an account id that is not a uuid, before anything is read', async () => {
    const s3 = await startTestS3();
    try {
      const storage = createS3Storage(s3.settings);
      const source = Readable.from([Buffer.from('x')]);
      await expect(storage.put('../other', source, { maxBytes: 100 })).rejects.toThrow('not an account id');
      await expect(storage.open('../other', `ab/${randomUUID()}`)).rejects.toThrow('not an account id');
      expect(await s3.objectNames()).toEqual([]);
    } finally {
      await s3.close();
    }
  });
});

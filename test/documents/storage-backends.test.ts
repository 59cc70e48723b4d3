import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServer, startServer } from '../../src/start/server.ts';
import { createPostgresDatabase, TEST_DATABASES } from '../helpers/databases.ts';
import { LEAD_ENTITY } from '../helpers/fixtures.ts';
import { startTestS3, type TestS3 } from '../helpers/s3.ts';
import { callApi, inProcessServerConfig, startServerProcess } from '../helpers/server-process.ts';

const ADMIN_TOKEN = 'adm_storage_backends_token_0123456789';
const PDF = Buffer.from('%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n');
/** Larger than a database chunk (256 KiB), so that a download joins several. */
const BLOB = randomBytes(600 * 1024);

const ENTITY = {
  ...LEAD_ENTITY,
  fields: [...LEAD_ENTITY.fields, { key: 'contract', label: 'Contract', type: 'file' }],
};

/** What a store holds, seen from outside the service. */
interface StoreProbe {
  env: Record<string, string>;
  /** How many stored files the store holds (undefined where it cannot be seen from outside). */
  count(): Promise<number | undefined>;
  close(): Promise<void>;
}

const STORES: { name: string; probe(): Promise<StoreProbe> }[] = [
  ...(TEST_DATABASES.includes('postgres')
    ? [
        {
          name: 'database on PostgreSQL',
          async probe(): Promise<StoreProbe> {
            const created = await createPostgresDatabase();
            return {
              env: { LEADS_FILES_STORAGE: 'database', DATABASE_URL: created.url },
              async count() {
                const client = new pg.Client({ connectionString: created.url });
                await client.connect();
                try {
                  const result = await client.query(
                    'SELECT count(DISTINCT key)::int AS n FROM document_file_chunks',
                  );
                  return result.rows[0].n as number;
                } finally {
                  await client.end();
                }
              },
              close: () => created.drop(),
            };
          },
        },
      ]
    : []),
  ...(TEST_DATABASES.includes('pglite')
    ? [
        {
          name: 'database on the embedded database',
          async probe(): Promise<StoreProbe> {
            // The embedded database is open in the server alone: its rows are not seen from here.
            return {
              env: { LEADS_FILES_STORAGE: 'database' },
              count: async () => undefined,
              close: async () => {},
            };
          },
        },
      ]
    : []),
  {
    name: 'S3',
    async probe(): Promise<StoreProbe> {
      const s3 = await startTestS3({ prefix: 'leadline' });
      return { env: s3.env, count: async () => (await s3.objectNames()).length, close: () => s3.close() };
    },
  },
];

/** A local server of the documents a record is handed over with. */
async function startFileServer(): Promise<{ base: string; close(): Promise<void> }> {
  const files = http.createServer((request, response) => {
    if (request.url === '/offer.pdf')
      return response.writeHead(200, { 'content-type': 'text/html' }).end(PDF);
    if (request.url === '/blob.bin') return response.writeHead(200).end(BLOB);
    response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => files.listen(0, '127.0.0.1', resolve));
  return {
    base: `http://127.0.0.1:${(files.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => files.close(() => resolve())),
  };
}

function startWith(dataDir: string, env: Record<string, string>) {
  return startServer(
    inProcessServerConfig({
      LEADS_DATA_DIR: dataDir,
      LEADS_ADMIN_TOKEN: ADMIN_TOKEN,
      LOG_LEVEL: 'silent',
      ...env,
    }),
  );
}

/** A record handed over with documents by URL. */
const handOver = (server: { url: string }, key: string, email: string, documents: object[]) =>
  callApi(`${server.url}/api/v1/records`, key, 'POST', { entity: 'lead', fields: { email }, documents });

async function accountWithLeads(server: { url: string }): Promise<string> {
  const account = await callApi(`${server.url}/admin/v1/accounts`, ADMIN_TOKEN, 'POST', {
    name: 'Stored documents',
    modules: [],
  });
  const key = account.body.api_key.key as string;
  expect((await callApi(`${server.url}/api/v1/settings/entities/lead`, key, 'PUT', ENTITY)).status).toBe(200);
  return key;
}

describe.each(STORES)('documents kept in $name, end to end', ({ probe }) => {
  let dataDir: string;
  let files: Awaited<ReturnType<typeof startFileServer>>;
  let store: StoreProbe;
  let server: RunningServer | undefined;
  let key: string;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'leads-stores-'));
    files = await startFileServer();
    store = await probe();
    server = await startWith(dataDir, store.env);
    key = await accountWithLeads(server);
  }, 90_000);
  afterAll(async () => {
    await server?.stop();
    await files?.close();
    await store?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  const documentsOf = async (recordId: string) =>
    (await callApi(`${server!.url}/api/v1/records/${recordId}`, key, 'GET')).body.documents as {
      id: string;
      name: string;
      mime: string;
      size: number;
      url: string;
    }[];

  describe('happy path', () => {
    it('fetches handed-over documents into the store and serves them byte-identical through signed links', async () => {
      const before = (await store.count()) ?? 0;
      const created = await handOver(server!, key, 'stored@backends.test', [
        { url: `${files.base}/offer.pdf` },
        { url: `${files.base}/blob.bin` },
      ]);
      expect(created.status).toBe(201);
      expect(created.body.warnings).toEqual([]);
      const documents = await documentsOf(created.body.id);
      const pdf = documents.find((document) => document.name === 'offer.pdf')!;
      const blob = documents.find((document) => document.name === 'blob.bin')!;
      expect(pdf).toMatchObject({ mime: 'application/pdf', size: PDF.length });
      expect(blob).toMatchObject({ size: BLOB.length });
      for (const [document, bytes] of [
        [pdf, PDF],
        [blob, BLOB],
      ] as const) {
        const signed = await callApi(`${server!.url}${document.url}/signed-url`, key, 'POST');
        expect(signed.status).toBe(200);
        const download = await fetch(signed.body.url);
        expect(download.status).toBe(200);
        expect(download.headers.get('content-length')).toBe(String(bytes.length));
        expect(Buffer.from(await download.arrayBuffer()).equals(bytes)).toBe(true);
      }
      const count = await store.count();
      if (count !== undefined) expect(count).toBe(before + 2);
      // Nothing went to a directory on disk.
      expect(await readdir(dataDir)).not.toContain('files');
    });

    it('removes the file a single-file field no longer holds', async () => {
      const created = await handOver(server!, key, 'replaced@backends.test', [
        { url: `${files.base}/offer.pdf`, field: 'contract' },
      ]);
      const before = (await store.count()) ?? 0;
      const patched = await callApi(`${server!.url}/api/v1/records/${created.body.id}`, key, 'PATCH', {
        documents: [{ url: `${files.base}/blob.bin`, field: 'contract' }],
      });
      expect(patched.body).toMatchObject({ updated: true, documents: 1 });
      const [document] = await documentsOf(created.body.id);
      const download = await fetch(`${server!.url}${document!.url}`, {
        headers: { authorization: `Bearer ${key}` },
      });
      expect(Buffer.from(await download.arrayBuffer()).equals(BLOB)).toBe(true);
      const count = await store.count();
      if (count !== undefined) expect(count).toBe(before);
    });
  });
});

describe('documents kept in S3, when the bucket cannot be reached or is asked for', () => {
  let dataDir: string;
  let files: Awaited<ReturnType<typeof startFileServer>>;
  let s3: TestS3;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'leads-stores-s3-'));
    files = await startFileServer();
    s3 = await startTestS3();
  });
  afterAll(async () => {
    await files?.close();
    await s3?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  /** A record handed over with one document to a server on the bucket, `env` changed: its warnings. */
  async function handOverWith(name: string, env: Record<string, string>, url: string) {
    const server = await startWith(path.join(dataDir, name), { ...s3.env, ...env });
    try {
      const created = await handOver(server, await accountWithLeads(server), `${name}@backends.test`, [
        { url },
      ]);
      expect(created.status).toBe(201);
      return created.body.warnings;
    } finally {
      await server.stop();
    }
  }

  describe('errors', () => {
    it('keeps the record and reports the document unavailable when the bucket refuses it', async () => {
      const url = `${files.base}/offer.pdf`;
      expect(await handOverWith('refused', { LEADS_S3_ACCESS_KEY_ID: 'NOT-A-KEY' }, url)).toEqual([
        { key: url, reason: 'document_unavailable', message: 'storage_error' },
      ]);
      expect(await s3.objectNames()).toEqual([]);
    }, 90_000);

    it('tells the operator: `leads serve` logs an error line when the store refuses a document', async () => {
      const url = `${files.base}/offer.pdf`;
      const server = await startServerProcess({
        ...s3.env,
        LEADS_S3_ACCESS_KEY_ID: 'NOT-A-KEY',
        LEADS_DATA_DIR: path.join(dataDir, 'logged'),
        LEADS_ADMIN_TOKEN: ADMIN_TOKEN,
        LEADS_FETCH_ALLOW_PRIVATE: 'true',
        LOG_LEVEL: 'error',
      });
      try {
        const created = await handOver(server, await accountWithLeads(server), 'logged@backends.test', [
          { url },
        ]);
        expect(created.body.warnings).toEqual([
          { key: url, reason: 'document_unavailable', message: 'storage_error' },
        ]);
        const logged = () =>
          server
            .output()
            .split('\n')
            .filter((line) => line.startsWith('{'))
            .map((line) => JSON.parse(line) as { level: number; msg: string; err?: unknown })
            .filter((line) => line.msg.startsWith('document storage failed'));
        await expect.poll(logged).toHaveLength(1);
        expect(logged()[0]).toMatchObject({ level: 50, err: expect.any(Object) });
      } finally {
        server.kill('SIGKILL');
        await server.exited;
      }
    }, 90_000);
  });

  describe('security', () => {
    it('reaches the operator’s bucket on a loopback address, but never fetches a handed-over address there', async () => {
      const url = `${s3.endpoint}/${s3.bucket}/`;
      expect(await handOverWith('guarded', { LEADS_FETCH_ALLOW_PRIVATE: 'false' }, url)).toEqual([
        { key: url, reason: 'document_unavailable', message: 'blocked_address' },
      ]);
      expect(await s3.objectNames()).toEqual([]);
    }, 90_000);
  });
});

import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase, TEST_DATABASES } from '../helpers/databases.ts';
import { LEADS_BIN, NODE_BIN, type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

const run = promisify(execFile);

/** Runs `leads …` to its end (60 s at most); never throws, answers the exit code and output. */
async function leads(args: string[], env: Record<string, string>) {
  try {
    const { stdout, stderr } = await run(NODE_BIN, [LEADS_BIN, ...args], {
      env: { ...process.env, LOG_LEVEL: 'warn', ...env },
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return {
      code: typeof failed.code === 'number' ? failed.code : 1,
      stdout: failed.stdout ?? '',
      stderr: failed.stderr ?? '',
    };
  }
}

async function call(url: string, key: string, init: { method?: string; body?: unknown } = {}) {
  const response = await fetch(url, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: response.status, body: (await response.json()) as any };
}

type Outcome =
  | { kind: 'answer'; status: number; body: string }
  | { kind: 'failed'; stage: 'before answer' | 'during body'; error: string };

/**
 * One request over `agent`, reporting whether it got a whole answer, failed before any answer,
 * or was cut off while its answer was being read.
 */
function request(
  agent: http.Agent,
  url: string,
  options: { method: string; path: string; key?: string; body?: unknown },
): Promise<Outcome> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const outgoing = http.request(
      {
        host: hostname,
        port,
        agent,
        method: options.method,
        path: options.path,
        timeout: 30_000,
        headers: {
          ...(options.key ? { authorization: `Bearer ${options.key}` } : {}),
          ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
        },
      },
      (incoming) => {
        let body = '';
        incoming.setEncoding('utf8');
        incoming.on('data', (chunk) => {
          body += chunk;
        });
        incoming.on('end', () =>
          resolve(
            incoming.complete
              ? { kind: 'answer', status: incoming.statusCode ?? 0, body }
              : { kind: 'failed', stage: 'during body', error: 'incomplete' },
          ),
        );
        incoming.on('error', (error) =>
          resolve({ kind: 'failed', stage: 'during body', error: String(error) }),
        );
      },
    );
    outgoing.on('timeout', () => outgoing.destroy(new Error('timed out')));
    outgoing.on('error', (error) =>
      resolve({ kind: 'failed', stage: 'before answer', error: String(error) }),
    );
    outgoing.end(options.body === undefined ? undefined : JSON.stringify(options.body));
  });
}

/** A port that something else holds for the test's duration. */
async function occupiedPort(): Promise<{ port: number; release(): Promise<void> }> {
  const holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const address = holder.address() as net.AddressInfo;
  return { port: address.port, release: () => new Promise((resolve) => holder.close(() => resolve())) };
}

/** A document source whose answers wait until `release()`: it keeps intake requests in flight. */
async function heldDocumentServer() {
  const held: http.ServerResponse[] = [];
  const documents = http.createServer((_incoming, outgoing) => {
    held.push(outgoing);
  });
  await new Promise<void>((resolve) => documents.listen(0, '127.0.0.1', resolve));
  const { port } = documents.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    async waitForRequests(count: number) {
      const deadline = Date.now() + 30_000;
      while (held.length < count) {
        if (Date.now() > deadline) throw new Error(`only ${held.length} of ${count} document requests came`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    release() {
      for (const outgoing of held.splice(0)) {
        outgoing.writeHead(200, { 'content-type': 'text/plain' });
        outgoing.end('A signed offer.\n');
      }
    },
    close() {
      documents.closeAllConnections();
      return new Promise<void>((resolve) => documents.close(() => resolve()));
    },
  };
}

/** Waits until nothing accepts connections on the port any more: the server has begun closing. */
async function waitUntilRefused(port: string) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const refused = await new Promise<boolean>((resolve) => {
      const probe = net.connect(Number(port), '127.0.0.1');
      probe.once('connect', () => {
        probe.destroy();
        resolve(false);
      });
      probe.once('error', () => resolve(true));
    });
    if (refused) return;
    if (Date.now() > deadline) throw new Error(`port ${port} still accepts connections`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('the service as a user starts it, on the embedded database', () => {
  let dir: string;
  let server: ServerProcess | undefined;
  let apiKey: string;
  let adminToken: string;
  let recordBeforeLockTest: string;
  const acknowledged: string[] = [];
  // Documents come from a server of this test on 127.0.0.1.
  const env = () => ({ LEADS_DATA_DIR: dir, LEADS_DEMO: 'true', LEADS_FETCH_ALLOW_PRIVATE: 'true' });
  const lockFile = () => path.join(dir, 'leads.lock');

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'leads-life-'));
  });
  afterAll(async () => {
    server?.kill('SIGKILL');
    await server?.exited;
    await rm(dir, { recursive: true, force: true });
  });

  describe('happy path', () => {
    it('prints the operator token, the demo key and a working curl line on the first start', async () => {
      server = await startServerProcess(env());
      // The banner is printed right after listening; give stdout a moment.
      for (let i = 0; i < 50 && !server.output().includes('API reference'); i++)
        await new Promise((r) => setTimeout(r, 100));
      const output = server.output();
      adminToken = /Operator token[^:]*: (adm_\S+)/.exec(output)?.[1] ?? '';
      apiKey = /Demo account API key[^:]*:\s+(lk_\S+)/.exec(output)?.[1] ?? '';
      expect(adminToken).not.toBe('');
      expect(apiKey).not.toBe('');

      const entities = await call(`${server.url}/api/v1/entities`, apiKey);
      expect(entities.status).toBe(200);
      expect(entities.body.entities.map((e: { key: string }) => e.key)).toEqual(['lead']);
      expect(entities.body.modules).toEqual(['booking', 'crm', 'distribution']);
      const accounts = await call(`${server.url}/admin/v1/accounts`, adminToken);
      expect(accounts.status).toBe(200);
      expect(accounts.body.accounts.map((a: { name: string }) => a.name)).toEqual(['Demo']);

      // The printed curl line, run as printed.
      const curlLines = output.slice(output.indexOf('curl -s -X POST')).split('\n').slice(0, 3).join('\n');
      const { stdout } = await run('bash', ['-c', curlLines], { timeout: 30_000 });
      expect(JSON.parse(stdout)).toMatchObject({ entity: 'lead', created: true });
    }, 90_000);

    it('stops on SIGTERM with whole answers to every request in flight, and releases the lock', async () => {
      // Each intake fetches a document from a server that holds its answer until the service
      // has stopped listening: all 50 requests are surely in flight when the shutdown begins.
      const documents = await heldDocumentServer();
      const agent = new http.Agent({ maxSockets: 50 });
      try {
        const inFlight = Array.from({ length: 50 }, (_, i) =>
          request(agent, server!.url, {
            method: 'POST',
            path: '/api/v1/records',
            key: apiKey,
            body: {
              entity: 'lead',
              fields: { email: `term${i}@shutdown.test` },
              documents: [{ url: `${documents.url}/offer-${i}.txt`, field: 'attachments' }],
            },
          }),
        );
        await documents.waitForRequests(50);
        server!.kill('SIGTERM');
        await waitUntilRefused(new URL(server!.url).port);
        documents.release();
        const outcomes = await Promise.all(inFlight);
        const exit = await server!.exited;
        server = undefined;

        expect(outcomes.filter((o) => o.kind === 'failed')).toEqual([]);
        for (const outcome of outcomes) {
          expect(outcome).toMatchObject({ kind: 'answer', status: 201 });
          if (outcome.kind === 'answer') acknowledged.push(JSON.parse(outcome.body).id);
        }
        expect(exit).toEqual({ code: 0, signal: null });
        expect(existsSync(lockFile())).toBe(false);
      } finally {
        agent.destroy();
        await documents.close();
      }
    }, 60_000);

    it('migrates a stopped data directory and leaves no lock behind', async () => {
      const migrated = await leads(['migrate'], env());
      expect(migrated).toMatchObject({ code: 0, stdout: 'the schema is up to date\n' });
      expect(existsSync(lockFile())).toBe(false);
    }, 60_000);

    it('starts again on the same directory without secrets, with every acknowledged record', async () => {
      server = await startServerProcess(env());
      await new Promise((r) => setTimeout(r, 300));
      expect(server.output()).not.toMatch(/lk_|adm_|Operator token|API key/);
      for (const id of acknowledged) {
        const record = await call(`${server.url}/api/v1/records/${id}`, apiKey);
        expect(record.status).toBe(200);
        expect(record.body.fields.email).toMatch(/^term\d+@shutdown\.test$/);
        expect(record.body.documents).toHaveLength(1);
      }
      const created = await call(`${server.url}/api/v1/records`, apiKey, {
        method: 'POST',
        body: { entity: 'lead', fields: { email: 'before-lock@life.test' } },
      });
      expect(created.status).toBe(201);
      recordBeforeLockTest = created.body.id;
    }, 90_000);
  });

  describe('security', () => {
    it("keeps nothing but the owner's pid and start identity in the lock file", async () => {
      const [pid, identity, end] = readFileSync(lockFile(), 'utf8').split('\n');
      expect(pid).toBe(String(server!.child.pid));
      expect(identity).toMatch(/^linux [0-9a-f-]{36} \d+$/);
      expect(end).toBe('');
    });
  });

  describe('errors', () => {
    it('refuses a second serve, migrate and worker on the data directory at once, and keeps serving', async () => {
      const started = Date.now();
      const [serving, migrating, working] = await Promise.all([
        leads(['serve'], { ...env(), PORT: '0' }),
        leads(['migrate'], env()),
        leads(['worker'], env()),
      ]);
      for (const refused of [serving, migrating, working]) {
        expect(refused.code).toBe(1);
        expect(refused.stderr).toContain('is in use by another process');
        expect(refused.stderr).toContain(lockFile());
        expect(refused.stderr).not.toMatch(/\n\s+at /);
      }
      expect(Date.now() - started).toBeLessThan(20_000);

      const record = await call(`${server!.url}/api/v1/records/${recordBeforeLockTest}`, apiKey);
      expect(record.status).toBe(200);
      expect(record.body.fields.email).toBe('before-lock@life.test');
      expect(existsSync(lockFile())).toBe(true);
    }, 60_000);

    it('takes over the lock of a process that was killed', async () => {
      server!.kill('SIGKILL');
      await server!.exited;
      expect(existsSync(lockFile())).toBe(true);
      server = await startServerProcess(env());
      const record = await call(`${server.url}/api/v1/records/${recordBeforeLockTest}`, apiKey);
      expect(record.status).toBe(200);
      server.kill('SIGTERM');
      expect((await server.exited).code).toBe(0);
      server = undefined;
      expect(existsSync(lockFile())).toBe(false);
    }, 90_000);
  });
});

describe.runIf(TEST_DATABASES.includes('postgres'))('the service on PostgreSQL', () => {
  it('migrates at start and runs two servers on one database at once', async () => {
    const database = await createPostgresDatabase();
    const env = { DATABASE_URL: database.url, LEADS_ADMIN_TOKEN: 'adm_two_servers_test_token_000000' };
    const migrated = await leads(['migrate'], env);
    expect(migrated.code).toBe(0);
    expect(migrated.stdout).toMatch(/^applied: 0001_foundation\.sql/);
    const [a, b] = await Promise.all([startServerProcess(env), startServerProcess(env)]);
    try {
      const created = await call(`${a.url}/admin/v1/accounts`, env.LEADS_ADMIN_TOKEN, {
        method: 'POST',
        body: { name: 'Shared' },
      });
      expect(created.status).toBe(201);
      expect((await call(`${b.url}/api/v1/entities`, created.body.api_key.key)).status).toBe(200);
      expect((await leads(['migrate'], env)).stdout).toBe('the schema is up to date\n');
    } finally {
      a.kill('SIGTERM');
      b.kill('SIGTERM');
      const exits = await Promise.all([a.exited, b.exited]);
      await database.drop();
      expect(exits.map((exit) => exit.code)).toEqual([0, 0]);
    }
  }, 90_000);

  it('shows the secrets of a first start that could not listen, and never again', async () => {
    const database = await createPostgresDatabase();
    const busy = await occupiedPort();
    // No operator token from the environment: the first start generates one.
    const env = { DATABASE_URL: database.url, LEADS_DEMO: 'true', LEADS_ADMIN_TOKEN: '' };
    let server: ServerProcess | undefined;
    try {
      const failed = await leads(['serve'], { ...env, PORT: String(busy.port) });
      expect(failed.code).toBe(1);
      expect(failed.stderr).toContain('EADDRINUSE');
      expect(failed.stderr).not.toMatch(/\n\s+at /);
      const adminToken = /Operator token[^:]*: (adm_\S+)/.exec(failed.stdout)?.[1] ?? '';
      const apiKey = /Demo account API key[^:]*:\s+(lk_\S+)/.exec(failed.stdout)?.[1] ?? '';
      expect(adminToken).not.toBe('');
      expect(apiKey).not.toBe('');
      expect(failed.stdout).not.toContain('curl');

      server = await startServerProcess(env);
      await new Promise((r) => setTimeout(r, 300));
      expect(server.output()).not.toMatch(/lk_|adm_/);
      expect((await call(`${server.url}/admin/v1/accounts`, adminToken)).status).toBe(200);
      const entities = await call(`${server.url}/api/v1/entities`, apiKey);
      expect(entities.status).toBe(200);
      expect(entities.body.entities.map((e: { key: string }) => e.key)).toEqual(['lead']);
    } finally {
      server?.kill('SIGTERM');
      await server?.exited;
      await busy.release();
      await database.drop();
    }
  }, 90_000);
});

describe("Node's compile cache", () => {
  it('is written once the server is up, so that a killed server still leaves it for the next start', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'leads-compile-cache-'));
    // Node's default place for it is under the temporary directory.
    const cache = path.join(dir, 'node-compile-cache');
    try {
      const server = await startServerProcess({ LEADS_DATA_DIR: path.join(dir, 'data'), TMPDIR: dir });
      // A kill gives the process no exit at which to write it.
      server.kill('SIGKILL');
      await server.exited;
      const cached = (await readdir(cache, { recursive: true, withFileTypes: true })).filter((entry) =>
        entry.isFile(),
      );
      // One entry per compiled module: the service's own sources and its dependencies.
      expect(cached.length).toBeGreaterThan(100);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 90_000);
});

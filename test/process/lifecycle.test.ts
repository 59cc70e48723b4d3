import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase } from '../helpers/databases.ts';
import { LEADS_BIN, NODE_BIN, type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

const run = promisify(execFile);

/** Runs `leads …` to its end; never throws, answers the exit code and output. */
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

async function get(url: string, key: string) {
  const response = await fetch(url, {
    headers: { authorization: `Bearer ${key}` },
    signal: AbortSignal.timeout(30_000),
  });
  return { status: response.status, body: (await response.json()) as any };
}

describe('the service as a user starts it, on the embedded database', () => {
  let dir: string;
  let server: ServerProcess | undefined;
  let apiKey: string;
  let adminToken: string;
  const env = () => ({ LEADS_DATA_DIR: dir, LEADS_DEMO: 'true' });

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'leads-life-'));
  });
  afterAll(async () => {
    server?.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  });

  it('prints the operator token, the demo key and a working curl line on the first start only', async () => {
    server = await startServerProcess(env());
    // The banner is printed right after listening; give stdout a moment.
    for (let i = 0; i < 50 && !server.output().includes('curl'); i++)
      await new Promise((r) => setTimeout(r, 100));
    const output = server.output();
    adminToken = /Operator token[^:]*: (adm_\S+)/.exec(output)?.[1] ?? '';
    apiKey = /Demo account API key[^:]*:\s+(lk_\S+)/.exec(output)?.[1] ?? '';
    expect(adminToken).not.toBe('');
    expect(apiKey).not.toBe('');

    const entities = await get(`${server.url}/api/v1/entities`, apiKey);
    expect(entities.status).toBe(200);
    expect(entities.body.entities.map((e: { key: string }) => e.key)).toContain('lead');
    expect(entities.body.modules).toEqual(['booking', 'crm', 'distribution']);
    expect((await get(`${server.url}/admin/v1/accounts`, adminToken)).status).toBe(200);

    // The printed curl line, run as printed.
    const curlLines = output.slice(output.indexOf('curl -s -X POST')).split('\n').slice(0, 3).join('\n');
    const { stdout } = await run('bash', ['-c', curlLines], { timeout: 30_000 });
    expect(JSON.parse(stdout)).toMatchObject({ entity: 'lead', created: true });
  }, 90_000);

  it('refuses a second process on the same data directory at once, and keeps serving', async () => {
    const started = Date.now();
    const second = await leads(['serve'], { ...env(), PORT: '0' });
    expect(second.code).not.toBe(0);
    expect(second.stderr).toMatch(/in use by another process/);
    const migrating = await leads(['migrate'], env());
    expect(migrating.code).toBe(1);
    expect(migrating.stderr).toMatch(/in use by another process/);
    expect(Date.now() - started).toBeLessThan(20_000);
    expect((await get(`${server!.url}/api/v1/entities`, apiKey)).status).toBe(200);
  }, 60_000);

  it('stops gracefully on SIGTERM: requests in flight get whole answers, the lock is released', async () => {
    const inFlight = Array.from({ length: 30 }, (_, i) =>
      fetch(`${server!.url}/api/v1/records`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ entity: 'lead', fields: { email: `term${i}@b.co` } }),
      })
        .then(async (response) => ({ status: response.status, body: (await response.json()) as any }))
        .catch(() => null),
    );
    await Promise.race(inFlight);
    server!.kill('SIGTERM');
    const answers = await Promise.all(inFlight);
    const exit = await server!.exited;
    expect(exit.code).toBe(0);
    const answered = answers.filter((a) => a !== null);
    expect(answered.length).toBeGreaterThan(0);
    // Requests that were in flight finished; ones that arrived after the signal were turned away
    // with 503 service_unavailable, never cut off.
    expect(answered.some((a) => a!.status === 201)).toBe(true);
    for (const answer of answered) {
      if (answer!.status === 201) expect(answer!.body.id).toMatch(/^[0-9a-f-]{36}$/);
      else expect(answer).toEqual({ status: 503, body: { error: 'service_unavailable' } });
    }
    expect(existsSync(path.join(dir, 'leads.lock'))).toBe(false);
    server = undefined;
  }, 60_000);

  it('starts again on the same directory without printing secrets, with the data intact', async () => {
    server = await startServerProcess(env());
    await new Promise((r) => setTimeout(r, 300));
    expect(server.output()).not.toMatch(/lk_|adm_/);
    const records = await get(`${server.url}/api/v1/records?limit=500`, apiKey);
    expect(records.status).toBe(200);
    expect(records.body.records.length).toBeGreaterThanOrEqual(1);
  }, 90_000);

  it('takes over the lock of a process that was killed', async () => {
    server!.kill('SIGKILL');
    await server!.exited;
    expect(existsSync(path.join(dir, 'leads.lock'))).toBe(true);
    server = await startServerProcess(env());
    expect((await get(`${server.url}/api/v1/entities`, apiKey)).status).toBe(200);
    server.kill('SIGTERM');
    expect((await server.exited).code).toBe(0);
    server = undefined;
  }, 90_000);
});

describe('the service on PostgreSQL', () => {
  it('migrates at start and runs two servers on one database at once', async () => {
    const database = await createPostgresDatabase();
    const env = { DATABASE_URL: database.url, LEADS_ADMIN_TOKEN: 'adm_two_servers_test_token_000000' };
    const migrated = await leads(['migrate'], env);
    expect(migrated.code).toBe(0);
    expect(migrated.stdout).toMatch(/applied: 0001_foundation.sql/);
    const [a, b] = await Promise.all([startServerProcess(env), startServerProcess(env)]);
    try {
      const created = await fetch(`${a.url}/admin/v1/accounts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${env.LEADS_ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Shared' }),
      });
      const { api_key } = (await created.json()) as { api_key: { key: string } };
      expect((await get(`${b.url}/api/v1/entities`, api_key.key)).status).toBe(200);
      expect((await leads(['migrate'], env)).stdout).toMatch(/up to date/);
    } finally {
      a.kill('SIGTERM');
      b.kill('SIGTERM');
      await Promise.all([a.exited, b.exited]);
      await database.drop();
    }
  }, 90_000);
});

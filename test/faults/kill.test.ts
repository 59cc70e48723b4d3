import { rm } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase, TEST_DATABASES } from '../helpers/databases.ts';
import { LEAD_ENTITY } from '../helpers/fixtures.ts';
import { migratedDataDir, type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

const ADMIN_TOKEN = 'adm_kill_test_operator_token_000000';

async function call(base: string, method: string, url: string, key: string, body?: unknown) {
  const response = await fetch(base + url, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  return { status: response.status, body: (await response.json()) as any };
}

describe.each(TEST_DATABASES)('kill -9 of the server during intake on %s', (kind) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  });

  it('keeps every acknowledged record exactly once, and frees the key of a request that died', async () => {
    const env: Record<string, string> = { LEADS_ADMIN_TOKEN: ADMIN_TOKEN, LEADS_RUN_WORKERS: 'false' };
    if (kind === 'postgres') {
      const database = await createPostgresDatabase();
      cleanups.push(database.drop);
      env.DATABASE_URL = database.url;
    } else {
      const dir = await migratedDataDir('leads-kill-');
      cleanups.push(() => rm(dir, { recursive: true, force: true }));
      env.LEADS_DATA_DIR = dir;
    }
    let server: ServerProcess = await startServerProcess(env);
    cleanups.push(async () => server.kill('SIGKILL'));

    const account = await call(server.url, 'POST', '/admin/v1/accounts', ADMIN_TOKEN, { name: 'Kill test' });
    expect(account.status).toBe(201);
    const key: string = account.body.api_key.key;
    expect((await call(server.url, 'PUT', '/api/v1/settings/entities/lead', key, LEAD_ENTITY)).status).toBe(
      200,
    );

    const acknowledged = new Map<string, string>();
    let stop = false;
    const worker = async (n: number) => {
      for (let i = 0; !stop && i < 10_000; i++) {
        const email = `w${n}-${i}@kill.test`;
        const meta = n % 2 === 0 ? { idempotency_key: `key-${email}` } : {};
        try {
          const answer = await call(server.url, 'POST', '/api/v1/records', key, {
            entity: 'lead',
            fields: { email },
            meta,
          });
          if (answer.status === 201) acknowledged.set(email, answer.body.id);
        } catch {
          return; // The server is gone.
        }
      }
    };
    const load = Promise.all([0, 1, 2, 3].map(worker));
    while (acknowledged.size < 30) await new Promise((resolve) => setTimeout(resolve, 20));
    const dyingBody = {
      entity: 'lead',
      fields: { email: 'dying@kill.test' },
      meta: { idempotency_key: 'dying-key' },
    };
    const dying = call(server.url, 'POST', '/api/v1/records', key, dyingBody).catch(() => null);
    server.kill('SIGKILL');
    stop = true;
    await server.exited;
    await load;
    const dyingAnswer = await dying;

    server = await startServerProcess(env);
    for (const [email, id] of acknowledged) {
      const read = await call(server.url, 'GET', `/api/v1/records/${id}`, key);
      expect(read.status, email).toBe(200);
      expect(read.body.fields.email).toBe(email);
    }
    const seen = new Map<string, number>();
    let cursor: string | null = null;
    do {
      const query = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
      const page = await call(server.url, 'GET', `/api/v1/records?limit=500${query}`, key);
      expect(page.status).toBe(200);
      for (const record of page.body.records) {
        seen.set(record.fields.email, (seen.get(record.fields.email) ?? 0) + 1);
      }
      cursor = page.body.next_cursor;
    } while (cursor);
    for (const [email, count] of seen) expect(count, email).toBe(1);

    // The key of the request that died is usable again (after its lease ran out, if it held one).
    const retry = await call(server.url, 'POST', '/api/v1/records', key, dyingBody);
    expect([200, 201]).toContain(retry.status);
    if (dyingAnswer && dyingAnswer.status === 201) expect(retry.body.id).toBe(dyingAnswer.body.id);
    const again = await call(server.url, 'POST', '/api/v1/records', key, dyingBody);
    expect(again.body.id).toBe(retry.body.id);
    server.kill('SIGTERM');
    await server.exited;
  }, 120_000);
});

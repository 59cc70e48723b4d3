import { rm } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase, TEST_DATABASES } from '../helpers/databases.ts';
import { LEAD_ENTITY } from '../helpers/fixtures.ts';
import { migratedDataDir, type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { startReceiver, waitFor } from './receiver.ts';

const ADMIN_TOKEN = 'adm_outbound_kill_test_token_000000';

async function call(base: string, method: string, url: string, key: string, body?: unknown) {
  const response = await fetch(base + url, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: response.status, body: (await response.json()) as any };
}

describe.each(TEST_DATABASES)('outbound messages across kill -9 on %s', (kind) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  });

  it('sends a message committed before the process was killed exactly once after the restart', async () => {
    const receiver = await startReceiver();
    cleanups.push(receiver.close);
    const env: Record<string, string> = {
      LEADS_ADMIN_TOKEN: ADMIN_TOKEN,
      LEADS_FETCH_ALLOW_PRIVATE: 'true',
      LEADS_RETRY_SCHEDULE: '0.1,0.1',
      // The first process only writes: it never sends, so the kill lands between commit and send.
      LEADS_RUN_WORKERS: 'false',
    };
    if (kind === 'postgres') {
      const database = await createPostgresDatabase();
      cleanups.push(database.drop);
      env.DATABASE_URL = database.url;
    } else {
      const dir = await migratedDataDir('leads-outbound-kill-');
      cleanups.push(() => rm(dir, { recursive: true, force: true }));
      env.LEADS_DATA_DIR = dir;
    }
    let server: ServerProcess = await startServerProcess(env);
    cleanups.push(async () => server.kill('SIGKILL'));
    const account = await call(server.url, 'POST', '/admin/v1/accounts', ADMIN_TOKEN, { name: 'Kill' });
    const key: string = account.body.api_key.key;
    expect((await call(server.url, 'PUT', '/api/v1/settings/entities/lead', key, LEAD_ENTITY)).status).toBe(
      200,
    );
    const webhook = await call(server.url, 'POST', '/api/v1/settings/webhooks', key, {
      url: receiver.url,
      events: ['record.created'],
    });
    expect(webhook.status).toBe(201);
    receiver.verifyWith(webhook.body.secret);
    const created = await call(server.url, 'POST', '/api/v1/records', key, {
      entity: 'lead',
      fields: { email: 'killed@outbound.test' },
    });
    expect(created.status).toBe(201);
    server.kill('SIGKILL');
    await server.exited;
    expect(receiver.received).toEqual([]);

    server = await startServerProcess({ ...env, LEADS_RUN_WORKERS: 'true' });
    await waitFor(() => receiver.received.length >= 1, 20_000, 'the message after the restart');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(receiver.invalid).toEqual([]);
    expect(receiver.received).toHaveLength(1);
    expect(receiver.received[0]!.json.data.record.id).toBe(created.body.id);
    server.kill('SIGTERM');
    await server.exited;
  }, 120_000);
});

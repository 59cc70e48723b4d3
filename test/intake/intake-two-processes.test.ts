import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase, TEST_DATABASES } from '../helpers/databases.ts';
import { LEAD_ENTITY } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

const ADMIN_TOKEN = 'adm_two_process_idempotency_00000000';

describe.runIf(TEST_DATABASES.includes('postgres'))(
  'idempotency across two server processes on one PostgreSQL',
  () => {
    let servers: ServerProcess[] = [];
    let drop: () => Promise<void>;
    let databaseUrl: string;

    beforeAll(async () => {
      const database = await createPostgresDatabase();
      drop = database.drop;
      databaseUrl = database.url;
      const env = { DATABASE_URL: database.url, LEADS_ADMIN_TOKEN: ADMIN_TOKEN, LEADS_RUN_WORKERS: 'false' };
      // One after the other: both run migrations at start.
      servers.push(await startServerProcess(env));
      servers.push(await startServerProcess(env));
    }, 90_000);
    afterAll(async () => {
      for (const server of servers) server.kill('SIGTERM');
      await Promise.all(servers.map((s) => s.exited));
      servers = [];
      await drop?.();
    });

    it('answers twenty concurrent repeats split over both processes identically, with one record', async () => {
      const [a, b] = servers as [ServerProcess, ServerProcess];
      const account = (await (
        await fetch(`${a.url}/admin/v1/accounts`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'Two nodes' }),
        })
      ).json()) as { api_key: { key: string } };
      const key = account.api_key.key;
      await fetch(`${a.url}/api/v1/settings/entities/lead`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(LEAD_ENTITY),
      });
      const body = JSON.stringify({
        entity: 'lead',
        fields: { email: 'two@b.co' },
        meta: { idempotency_key: 'shared-key' },
      });
      const answers = await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const response = await fetch(`${(i % 2 === 0 ? a : b).url}/api/v1/records`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body,
          });
          return { status: response.status, text: await response.text() };
        }),
      );
      expect(new Set(answers.map((x) => x.status))).toEqual(new Set([201]));
      expect(new Set(answers.map((x) => x.text)).size).toBe(1);

      const list = (await (
        await fetch(`${b.url}/api/v1/records?limit=500`, { headers: { authorization: `Bearer ${key}` } })
      ).json()) as { records: unknown[] };
      expect(list.records).toHaveLength(1);
      expect(databaseUrl).toContain('leads_test_');
    }, 60_000);
  },
);

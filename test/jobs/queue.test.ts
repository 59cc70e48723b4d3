import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { type DatabaseHandle, openDatabase } from '../../src/db/client.ts';
import { migrate } from '../../src/db/migrate.ts';
import { purgeExpiredIdempotencyKeys } from '../../src/jobs/maintenance.jobs.ts';
import { createQueue } from '../../src/jobs/queue.ts';
import { createPostgresDatabase, TEST_DATABASES } from '../helpers/databases.ts';

async function until(check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.each(TEST_DATABASES)('the durable job queue on %s', (kind) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  });

  /** A database that survives closing: an on-disk PGlite directory, or a PostgreSQL database. */
  async function durableDatabase(): Promise<() => Promise<DatabaseHandle>> {
    if (kind === 'pglite') {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'leads-jobs-'));
      cleanups.push(() => rm(dir, { recursive: true, force: true }));
      return () => openDatabase({ databaseUrl: undefined, dataDir: dir, poolSize: 1 });
    }
    const created = await createPostgresDatabase();
    cleanups.push(created.drop);
    return () => openDatabase({ databaseUrl: created.url, dataDir: '', poolSize: 4 });
  }

  it('runs a job enqueued in a committed transaction, and never one whose transaction rolled back', async () => {
    const open = await durableDatabase();
    const database = await open();
    await migrate(database.db);
    const queue = createQueue(database, { pollingIntervalSeconds: 0.5 });
    const seen: string[] = [];
    queue.register<{ tag: string }>('test.echo', async (payload) => {
      seen.push(payload.tag);
    });
    await queue.start();
    try {
      await database.db
        .transaction()
        .execute(async (tx) => {
          await queue.enqueue(tx, 'test.echo', { tag: 'rolled-back' });
          throw new Error('roll back');
        })
        .catch(() => {});
      await database.db.transaction().execute(async (tx) => {
        await sql`SELECT 1`.execute(tx);
        await queue.enqueue(tx, 'test.echo', { tag: 'committed' });
      });
      await until(() => seen.includes('committed'));
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(seen).toEqual(['committed']);
    } finally {
      await queue.stop();
      await database.close();
    }
  }, 60_000);

  it('keeps jobs across a restart and runs each exactly once', async () => {
    const open = await durableDatabase();
    const first = await open();
    await migrate(first.db);
    const producer = createQueue(first);
    producer.register('test.survivor', async () => {});
    await producer.start({ work: false });
    for (const n of [1, 2, 3]) await producer.enqueue(first.db, 'test.survivor', { n });
    await producer.stop();
    await first.close();

    const second = await open();
    const consumer = createQueue(second, { pollingIntervalSeconds: 0.5 });
    const runs: number[] = [];
    consumer.register<{ n: number }>('test.survivor', async (payload) => {
      runs.push(payload.n);
    });
    await consumer.start();
    try {
      await until(() => runs.length >= 3);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(runs.sort()).toEqual([1, 2, 3]);
    } finally {
      await consumer.stop();
      await second.close();
    }
  }, 60_000);

  it('purges only idempotency keys past their expiry', async () => {
    const open = await durableDatabase();
    const database = await open();
    await migrate(database.db);
    try {
      const account = '11111111-1111-4111-8111-111111111111';
      await database.db.insertInto('accounts').values({ id: account, name: 'Purge', modules: [] }).execute();
      const row = (key: string, expires: string) => ({
        account_id: account,
        scope: 'test',
        key,
        request_hash: 'h',
        state: 'done',
        lease_until: new Date(),
        expires_at: expires,
      });
      await database.db
        .insertInto('idempotency_keys')
        .values([row('old', '2000-01-01T00:00:00Z'), row('fresh', '2999-01-01T00:00:00Z')])
        .execute();
      expect(await purgeExpiredIdempotencyKeys(database.db)).toBe(1);
      const left = await database.db.selectFrom('idempotency_keys').select('key').execute();
      expect(left.map((r) => r.key)).toEqual(['fresh']);
    } finally {
      await database.close();
    }
  });
});

import type { PGlite } from '@electric-sql/pglite';
import { sql } from 'kysely';
import { PgBoss } from 'pg-boss';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/types.ts';
import { pgliteQueueDatabase } from '../../src/jobs/pglite-adapter.ts';
import { QUEUE_SCHEMA } from '../../src/jobs/queue.ts';
import { createTestDatabase, TEST_DATABASES, type TestDatabase } from '../helpers/databases.ts';
import { sleep, within } from './support.ts';

/**
 * pg-boss and the service's Kysely share one PGlite session on the embedded database. These tests
 * check that neither side's transaction can take the other's writes with it.
 */
describe.runIf(TEST_DATABASES.includes('pglite'))('pg-boss and Kysely sharing one PGlite instance', () => {
  let database: TestDatabase;
  let db: Db;
  let pglite: PGlite;
  let boss: PgBoss;

  beforeAll(async () => {
    database = await createTestDatabase('pglite');
    db = database.handle.db;
    pglite = database.handle.pglite as PGlite;
    await sql`CREATE TABLE sharing_probe (v text NOT NULL)`.execute(db);
    boss = new PgBoss({ db: pgliteQueueDatabase(pglite), backend: 'pglite', schema: QUEUE_SCHEMA });
    await boss.start();
    await boss.createQueue('probe.job');
  });
  afterAll(async () => {
    await boss?.stop({ graceful: false });
    await database?.drop();
  });

  async function probeValues(): Promise<string[]> {
    const result = await sql<{ v: string }>`SELECT v FROM sharing_probe`.execute(db);
    return result.rows.map((row) => row.v).sort();
  }

  it('keeps a job pg-boss writes while a Kysely transaction is open, when that transaction rolls back', async () => {
    await sql`DELETE FROM sharing_probe`.execute(db);
    let sent: Promise<string | null> | undefined;
    let sentBeforeRollback = false;
    await expect(
      db.transaction().execute(async (tx) => {
        await sql`INSERT INTO sharing_probe VALUES ('rolled back')`.execute(tx);
        sent = boss.send('probe.job', { n: 1 });
        sent.then(
          () => {
            sentBeforeRollback = true;
          },
          () => {},
        );
        await sleep(300);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');

    // pg-boss's statement waited for the transaction instead of running inside it.
    expect(sentBeforeRollback).toBe(false);
    const id = await within(sent as Promise<string | null>, 5_000, 'send');
    const [job] = await boss.findJobs('probe.job', { id: id as string });
    expect(job).toMatchObject({ id, state: 'created', data: { n: 1 } });
    expect(await probeValues()).toEqual([]);
  });

  it('keeps a Kysely transaction whole when a pg-boss script beside it fails, and leaves no broken session', async () => {
    await sql`DELETE FROM sharing_probe`.execute(db);
    const adapter = pgliteQueueDatabase(pglite);
    for (let round = 0; round < 3; round++) {
      // The shape of pg-boss's maintenance scripts: its own transaction, failing half-way. All three
      // are issued in the same tick, so the Kysely calls queue behind the script.
      const script = adapter.executeSql(
        `BEGIN; INSERT INTO sharing_probe VALUES ('script ${round}'); SELECT 1 / 0; COMMIT;`,
      );
      const transaction = db.transaction().execute(async (tx) => {
        await sql`INSERT INTO sharing_probe VALUES (${`transaction ${round}`})`.execute(tx);
      });
      const single = sql`INSERT INTO sharing_probe VALUES (${`single ${round}`})`.execute(db);
      await expect(script).rejects.toThrow('division by zero');
      await within(transaction, 5_000, 'the Kysely transaction');
      await within(single, 5_000, 'the single statement');
    }
    expect(await probeValues()).toEqual(
      ['single 0', 'single 1', 'single 2', 'transaction 0', 'transaction 1', 'transaction 2'].sort(),
    );
  });

  it('runs scripts as a connection of their own would: RETURNING inside a transaction, and statements refusing one', async () => {
    const adapter = pgliteQueueDatabase(pglite);
    const inserted = await adapter.executeSql(
      "BEGIN; INSERT INTO sharing_probe VALUES ('returned') RETURNING v; COMMIT;",
    );
    expect(inserted.rows).toEqual([{ v: 'returned' }]);
    await adapter.executeSql('CREATE INDEX CONCURRENTLY IF NOT EXISTS sharing_probe_v ON sharing_probe (v)');
    const index = await sql<{ indexname: string }>`
      SELECT indexname FROM pg_indexes WHERE tablename = 'sharing_probe'
    `.execute(db);
    expect(index.rows).toEqual([{ indexname: 'sharing_probe_v' }]);
    const selected = await adapter.executeSql('SELECT v FROM sharing_probe WHERE v = $1', ['returned']);
    expect(selected.rows).toEqual([{ v: 'returned' }]);
  });
});

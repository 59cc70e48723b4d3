import { afterEach, describe, expect, it } from 'vitest';
import { runEmbeddedAutovacuum, tablesDueForMaintenance } from '../../src/db/autovacuum.ts';
import { type DatabaseHandle, openDatabase } from '../../src/db/client.ts';

interface TableStats {
  n_mod_since_analyze: number;
  n_dead_tup: number;
  last_analyze: Date | null;
  last_vacuum: Date | null;
}

async function statsOf(handle: DatabaseHandle, table: string): Promise<TableStats> {
  await handle.pglite!.query('SELECT pg_stat_force_next_flush()');
  const { rows } = await handle.pglite!.query<TableStats>(
    `SELECT n_mod_since_analyze::int, n_dead_tup::int, last_analyze, last_vacuum
       FROM pg_stat_user_tables WHERE relname = $1`,
    [table],
  );
  return rows[0]!;
}

describe('embedded autovacuum (PGlite has no autovacuum daemon)', () => {
  let handle: DatabaseHandle | undefined;
  afterEach(async () => {
    await handle?.close();
    handle = undefined;
  });

  async function open(autovacuumIntervalMs?: number) {
    handle = await openDatabase({
      databaseUrl: undefined,
      dataDir: '',
      poolSize: 1,
      inMemory: true,
      autovacuumIntervalMs,
    });
    await handle.pglite!.exec('CREATE TABLE grown (id int PRIMARY KEY, label text NOT NULL)');
    return handle;
  }

  it('analyzes a table once more than 50 rows plus 10% of it changed, and only then', async () => {
    const { pglite } = await open(3_600_000);
    await pglite!.query(`INSERT INTO grown SELECT n, 'row ' || n FROM generate_series(1, 40) n`);
    expect(await tablesDueForMaintenance(pglite!)).toEqual([]);
    await pglite!.query(`INSERT INTO grown SELECT n, 'row ' || n FROM generate_series(41, 200) n`);
    expect(await tablesDueForMaintenance(pglite!)).toEqual([{ table: 'public.grown', action: 'analyze' }]);

    expect(await runEmbeddedAutovacuum(pglite!)).toEqual([{ table: 'public.grown', action: 'analyze' }]);
    const stats = await statsOf(handle!, 'grown');
    expect(stats.last_analyze).not.toBeNull();
    expect(stats.n_mod_since_analyze).toBe(0);
    // The planner now knows the table's size.
    const { rows } = await pglite!.query<{ reltuples: number }>(
      `SELECT reltuples FROM pg_class WHERE relname = 'grown'`,
    );
    expect(rows[0]!.reltuples).toBe(200);
    expect(await tablesDueForMaintenance(pglite!)).toEqual([]);
  });

  it('vacuums a table whose dead rows pass 50 plus 20% of it, so their space is reclaimed', async () => {
    const { pglite } = await open(3_600_000);
    await pglite!.query(`INSERT INTO grown SELECT n, 'row ' || n FROM generate_series(1, 1000) n`);
    await runEmbeddedAutovacuum(pglite!);
    await pglite!.query('DELETE FROM grown WHERE id <= 300');
    expect((await statsOf(handle!, 'grown')).n_dead_tup).toBe(300);
    expect(await tablesDueForMaintenance(pglite!)).toEqual([{ table: 'public.grown', action: 'vacuum' }]);

    await runEmbeddedAutovacuum(pglite!);
    const stats = await statsOf(handle!, 'grown');
    expect(stats.last_vacuum).not.toBeNull();
    expect(stats.n_dead_tup).toBe(0);
    expect(await tablesDueForMaintenance(pglite!)).toEqual([]);
  });

  it('analyzes or vacuums a table at most once a minute, unless its rows more than doubled since', async () => {
    const { pglite } = await open(3_600_000);
    await pglite!.query(`INSERT INTO grown SELECT n, 'row ' || n FROM generate_series(1, 1000) n`);
    expect(await runEmbeddedAutovacuum(pglite!)).toEqual([{ table: 'public.grown', action: 'analyze' }]);
    // 300 rows more: past 50 plus 10%, but analyzed less than a minute ago and not doubled.
    await pglite!.query(`INSERT INTO grown SELECT n, 'row ' || n FROM generate_series(1001, 1300) n`);
    expect(await tablesDueForMaintenance(pglite!)).toEqual([]);
    // The same table once the minute is over (an interval of 0 stands for it).
    expect(await tablesDueForMaintenance(pglite!, 0)).toEqual([{ table: 'public.grown', action: 'analyze' }]);
    // More than twice the rows of its last analysis: due at once.
    await pglite!.query(`INSERT INTO grown SELECT n, 'row ' || n FROM generate_series(1301, 2100) n`);
    expect(await runEmbeddedAutovacuum(pglite!)).toEqual([{ table: 'public.grown', action: 'analyze' }]);

    await pglite!.query('DELETE FROM grown WHERE id <= 600');
    expect(await runEmbeddedAutovacuum(pglite!)).toEqual([{ table: 'public.grown', action: 'vacuum' }]);
    // Dead rows past 50 plus 20% again, within the minute of that VACUUM (and its analysis).
    await pglite!.query('DELETE FROM grown WHERE id <= 1200');
    expect((await statsOf(handle!, 'grown')).n_dead_tup).toBe(600);
    expect(await tablesDueForMaintenance(pglite!)).toEqual([]);
    expect(await tablesDueForMaintenance(pglite!, 0)).toEqual([{ table: 'public.grown', action: 'vacuum' }]);
  });

  it('quotes table names it did not choose', async () => {
    const { pglite } = await open(3_600_000);
    await pglite!.exec('CREATE TABLE "Odd ""name""" (id int)');
    await pglite!.query(`INSERT INTO "Odd ""name""" SELECT generate_series(1, 100)`);
    expect(await runEmbeddedAutovacuum(pglite!)).toEqual([
      { table: 'public."Odd ""name"""', action: 'analyze' },
    ]);
    expect(await tablesDueForMaintenance(pglite!)).toEqual([]);
  });

  it('runs by itself on every embedded database the service opens, and stops with it', async () => {
    const { pglite } = await open(50);
    await pglite!.query(`INSERT INTO grown SELECT n, 'row ' || n FROM generate_series(1, 500) n`);
    const deadline = Date.now() + 10_000;
    while ((await statsOf(handle!, 'grown')).last_analyze === null && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect((await statsOf(handle!, 'grown')).last_analyze).not.toBeNull();
    await handle!.close();
    handle = undefined;
    expect(pglite!.closed).toBe(true);
  });
});

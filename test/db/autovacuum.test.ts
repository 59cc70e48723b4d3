import { afterEach, describe, expect, it } from 'vitest';
import {
  createMaintenancePacing,
  LARGE_TABLE_ROWS,
  runEmbeddedAutovacuum,
  tablesDueForMaintenance,
} from '../../src/db/autovacuum.ts';
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

  describe('a table of 100,000 rows or more waits for a quiet look (its steps hold the one session long)', () => {
    const analyzed = [{ table: 'public.grown', action: 'analyze' }];
    /** A clock of the test's own: each look sees the time the test says has passed. */
    let clock = 0;
    /** The database ran statements for half the time since the last look: busy. */
    async function busyFor(ms: number) {
      await handle!.pglite!.query('SELECT pg_sleep($1)', [ms / 2 / 1000]);
      clock += ms;
    }
    async function largeTable(rows = 120_000) {
      const { pglite } = await open(3_600_000);
      await pglite!.query(`INSERT INTO grown SELECT n, 'row ' || n FROM generate_series(1, $1::int) n`, [
        rows,
      ]);
      return pglite!;
    }
    /** The session's time running statements so far (ms), published first. */
    async function activeTime() {
      await handle!.pglite!.query('SELECT pg_stat_force_next_flush()');
      const { rows } = await handle!.pglite!.query<{ active_time: number }>(
        'SELECT active_time FROM pg_stat_database WHERE datname = current_database()',
      );
      return rows[0]!.active_time;
    }

    it('analyzes it at once while it was never analyzed, then at the first quiet look once due', async () => {
      expect(LARGE_TABLE_ROWS).toBe(100_000);
      const pglite = await largeTable();
      const pacing = createMaintenancePacing({ now: () => clock });
      // Never analyzed: a young table's step goes at once, busy or not.
      await busyFor(100);
      expect(await runEmbeddedAutovacuum(pglite, { pacing })).toEqual(analyzed);

      await pglite.query(`INSERT INTO grown SELECT n, 'row ' || n FROM generate_series(120001, 140000) n`);
      await busyFor(100);
      expect(await runEmbeddedAutovacuum(pglite, { pacing, minIntervalMs: 0 })).toEqual([]);
      expect(await tablesDueForMaintenance(pglite, 0)).toEqual(analyzed);
      await busyFor(100);
      expect(await runEmbeddedAutovacuum(pglite, { pacing, minIntervalMs: 0 })).toEqual([]);
      // Ten seconds without a statement: quiet.
      clock += 10_000;
      expect(await runEmbeddedAutovacuum(pglite, { pacing, minIntervalMs: 0 })).toEqual(analyzed);
      expect(await tablesDueForMaintenance(pglite, 0)).toEqual([]);
    });

    it('does not take the first look for a quiet one (nothing to compare it with)', async () => {
      const pglite = await largeTable();
      expect(await runEmbeddedAutovacuum(pglite)).toEqual(analyzed);
      await pglite.query(`INSERT INTO grown SELECT n, 'row ' || n FROM generate_series(120001, 140000) n`);
      const pacing = createMaintenancePacing({ now: () => clock });
      expect(await runEmbeddedAutovacuum(pglite, { pacing, minIntervalMs: 0 })).toEqual([]);
      clock += 10_000;
      expect(await runEmbeddedAutovacuum(pglite, { pacing, minIntervalMs: 0 })).toEqual(analyzed);
    });

    it('waits no longer than its longest wait while the database stays busy', async () => {
      const pglite = await largeTable();
      const pacing = createMaintenancePacing({ now: () => clock, maxWaitMs: 1_000 });
      expect(await runEmbeddedAutovacuum(pglite, { pacing })).toEqual(analyzed);
      await pglite.query(`INSERT INTO grown SELECT n, 'row ' || n FROM generate_series(120001, 140000) n`);
      // Due from the first of these looks on; busy at every one.
      for (let look = 0; look < 10; look++) {
        await busyFor(100);
        expect(await runEmbeddedAutovacuum(pglite, { pacing, minIntervalMs: 0 })).toEqual([]);
      }
      await busyFor(100);
      expect(await runEmbeddedAutovacuum(pglite, { pacing, minIntervalMs: 0 })).toEqual(analyzed);
    });

    it('vacuums it at a quiet look too, and its own steps do not count as the database busy', async () => {
      const pglite = await largeTable(150_000);
      const pacing = createMaintenancePacing({ now: () => clock });
      expect(await runEmbeddedAutovacuum(pglite, { pacing })).toEqual(analyzed);
      // More than 50 plus 20% dead; 119,000 rows stay.
      await pglite.query('DELETE FROM grown WHERE id <= 31000');
      await busyFor(100);
      expect(await runEmbeddedAutovacuum(pglite, { pacing, minIntervalMs: 0 })).toEqual([]);
      clock += 10_000;
      const before = await activeTime();
      expect(await runEmbeddedAutovacuum(pglite, { pacing, minIntervalMs: 0 })).toEqual([
        { table: 'public.grown', action: 'vacuum' },
      ]);
      const after = await activeTime();
      // The VACUUM's time is remembered as seen: the next look counts only what comes after it.
      expect(after - before).toBeGreaterThan(5);
      expect(after - pacing.last!.activeMs).toBeLessThan(1);
      expect(pacing.last!.at).toBe(clock);
    });

    it('leaves a smaller table out of it: its step goes at once, busy or not', async () => {
      const { pglite } = await open(3_600_000);
      await pglite!.query(`INSERT INTO grown SELECT n, 'row ' || n FROM generate_series(1, 90000) n`);
      const pacing = createMaintenancePacing({ now: () => clock });
      expect(await runEmbeddedAutovacuum(pglite!, { pacing })).toEqual(analyzed);
      await pglite!.query(`INSERT INTO grown SELECT n, 'row ' || n FROM generate_series(90001, 100000) n`);
      await busyFor(100);
      expect(await runEmbeddedAutovacuum(pglite!, { pacing, minIntervalMs: 0 })).toEqual(analyzed);
    });
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

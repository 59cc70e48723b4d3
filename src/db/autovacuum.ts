import type { PGlite } from '@electric-sql/pglite';

/**
 * The embedded database's autovacuum. PGlite is a single PostgreSQL backend without the
 * autovacuum daemon, so nothing ever analyzes or vacuums its tables on its own. Without table
 * statistics the planner guesses sizes, and a plan cached while a table was nearly empty stays in
 * use as it grows: intake's insert of 100 records with their history took 23 ms on a new
 * database and 170 ms once it held 36,000 records, because the foreign-key checks of the history
 * rows got slower with every record; one ANALYZE of the records table (which also makes
 * PostgreSQL replan) took its records-and-events part from 45 ms back to 9 ms. Dead rows of updated
 * and deleted tuples (idempotency keys, the job queue) are never reclaimed without VACUUM.
 *
 * So every few seconds this looks at the statistics PostgreSQL keeps per table and does what the
 * daemon would do with its default thresholds: ANALYZE a table once more than 50 rows plus 10% of
 * it changed since its last analysis, VACUUM (and analyze) it once more than 50 rows plus 20% of
 * it are dead. Each statement takes PGlite's one session like any query, so it waits for an open
 * transaction and requests wait for it; on a large table a VACUUM can hold requests for a moment,
 * which is the embedded database's trade-off (production runs PostgreSQL, whose daemon does this
 * beside the requests).
 *
 * Like the daemon, which visits a database once a minute (autovacuum_naptime), a table is
 * analyzed, or vacuumed, at most once a minute: an ANALYZE samples up to 30,000 rows whatever the
 * table's size, and of the records table it took 0.4–0.9 s of the service's one thread at 30,000–
 * 300,000 records, so at 10% of 150,000 records an analysis came every 3 s of bulk intake and took
 * a quarter of the thread. A table whose rows more than doubled since its last analysis is
 * analyzed at the next look all the same: a young table's plans are the ones a stale estimate
 * spoils (above), and doubling spaces those analyses out by themselves.
 */

/** How often the table statistics are looked at. */
export const EMBEDDED_AUTOVACUUM_INTERVAL_MS = 5_000;

/** At most one ANALYZE, and one VACUUM, of a table in this time (PostgreSQL's autovacuum_naptime). */
export const EMBEDDED_MAINTENANCE_MIN_INTERVAL_MS = 60_000;

/** PostgreSQL's defaults: autovacuum_analyze_threshold, _scale_factor, autovacuum_vacuum_threshold, _scale_factor. */
const ANALYZE_THRESHOLD = 50;
const ANALYZE_SCALE_FACTOR = 0.1;
const VACUUM_THRESHOLD = 50;
const VACUUM_SCALE_FACTOR = 0.2;

export interface MaintenanceStep {
  table: string;
  action: 'analyze' | 'vacuum';
}

/**
 * The tables due for maintenance now, and what each needs. `minIntervalMs`: how long after a
 * table's last ANALYZE (or VACUUM) it may have the next one, unless its rows more than doubled.
 */
export async function tablesDueForMaintenance(
  pglite: PGlite,
  minIntervalMs = EMBEDDED_MAINTENANCE_MIN_INTERVAL_MS,
): Promise<MaintenanceStep[]> {
  // A backend publishes its table counters at most once a second, when idle; this makes the
  // pending ones visible to the next statement.
  await pglite.query('SELECT pg_stat_force_next_flush()');
  const { rows } = await pglite.query<{ table: string; vacuum: boolean }>(
    `WITH due AS (
       SELECT s.schemaname, s.relname, format('%I.%I', s.schemaname, s.relname) AS table,
              s.n_mod_since_analyze > $1 + $2 * greatest(c.reltuples, 0)
                AND (s.last_analyze IS NULL OR s.last_analyze <= clock_timestamp() - $5 * interval '1 millisecond'
                     OR s.n_live_tup > 2 * greatest(c.reltuples, 0)) AS analyze_due,
              s.n_dead_tup > $3 + $4 * greatest(c.reltuples, 0)
                AND (s.last_vacuum IS NULL OR s.last_vacuum <= clock_timestamp() - $5 * interval '1 millisecond')
                AS vacuum_due
         FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
     )
     SELECT "table", vacuum_due AS vacuum FROM due WHERE analyze_due OR vacuum_due ORDER BY schemaname, relname`,
    [ANALYZE_THRESHOLD, ANALYZE_SCALE_FACTOR, VACUUM_THRESHOLD, VACUUM_SCALE_FACTOR, minIntervalMs],
  );
  return rows.map((row) => ({ table: row.table, action: row.vacuum ? 'vacuum' : 'analyze' }));
}

/** One pass: analyzes or vacuums every table due; returns what it did. */
export async function runEmbeddedAutovacuum(pglite: PGlite): Promise<MaintenanceStep[]> {
  const due = await tablesDueForMaintenance(pglite);
  for (const step of due) {
    // The table name comes from format('%I.%I'), quoted by PostgreSQL itself. VACUUM refuses a
    // transaction block, so it goes as a simple-protocol statement of its own.
    await pglite.exec(step.action === 'vacuum' ? `VACUUM (ANALYZE) ${step.table}` : `ANALYZE ${step.table}`);
  }
  return due;
}

export interface EmbeddedAutovacuum {
  /** Waits for a pass in progress and starts no other. */
  stop(): Promise<void>;
}

/** Runs a pass every `intervalMs` until stopped; a failed pass is reported and the next one tries again. */
export function startEmbeddedAutovacuum(
  pglite: PGlite,
  options: { intervalMs?: number; onError: (error: unknown) => void },
): EmbeddedAutovacuum {
  let running: Promise<void> | null = null;
  let stopped = false;
  const timer = setInterval(() => {
    if (running || stopped || pglite.closed) return;
    running = runEmbeddedAutovacuum(pglite)
      .then(() => {})
      .catch((error: unknown) => {
        if (!stopped && !pglite.closed) options.onError(error);
      })
      .finally(() => {
        running = null;
      });
  }, options.intervalMs ?? EMBEDDED_AUTOVACUUM_INTERVAL_MS);
  // Maintenance alone never keeps the process alive.
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}

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
 *
 * The daemon works beside the requests; here a step holds the one session, and PGlite runs in the
 * service's thread, so every request waits for it. On a large table that wait is long: an ANALYZE
 * of a million records reads its 30,000 sampled pages from the files (they outgrow the buffers)
 * and held the session 0.6–0.8 s on an idle service, 1.7 s under intake, where it cost a 10-s
 * measured round a fifth of its requests. So a step on a table of `LARGE_TABLE_ROWS` rows or more
 * waits for a quiet look: one at which the database was busy with statements for at most a tenth
 * of the time since the look before (`pg_stat_database.active_time`, the pass's own steps left
 * out; an idle service with its workers uses under 1%). It waits at most
 * `EMBEDDED_MAINTENANCE_MAX_WAIT_MS`, so that a service busy without a pause still has its
 * statistics kept, with one such wait every few minutes. Smaller tables, and any table never
 * analyzed, go at once: their steps are short, and they are the young tables whose plans a stale
 * estimate spoils.
 */

/** How often the table statistics are looked at. */
export const EMBEDDED_AUTOVACUUM_INTERVAL_MS = 5_000;

/** At most one ANALYZE, and one VACUUM, of a table in this time (PostgreSQL's autovacuum_naptime). */
export const EMBEDDED_MAINTENANCE_MIN_INTERVAL_MS = 60_000;

/** A table with at least this many rows at its last analysis waits for a quiet look (above). */
export const LARGE_TABLE_ROWS = 100_000;

/** The longest a large table's due step waits for a quiet look. */
export const EMBEDDED_MAINTENANCE_MAX_WAIT_MS = 5 * 60_000;

/** Quiet: the database ran statements for at most this share of the time since the last look. */
const QUIET_ACTIVE_SHARE = 0.1;

/** PostgreSQL's defaults: autovacuum_analyze_threshold, _scale_factor, autovacuum_vacuum_threshold, _scale_factor. */
const ANALYZE_THRESHOLD = 50;
const ANALYZE_SCALE_FACTOR = 0.1;
const VACUUM_THRESHOLD = 50;
const VACUUM_SCALE_FACTOR = 0.2;

export interface MaintenanceStep {
  table: string;
  action: 'analyze' | 'vacuum';
}

/** A due step, with the table's rows at its last analysis (-1: never analyzed). */
interface DueStep extends MaintenanceStep {
  rows: number;
}

/** Publishes the session's pending statistics, so that the next statement sees them. */
async function flushStatistics(pglite: PGlite): Promise<void> {
  // A backend publishes its counters at most once a second, when idle.
  await pglite.query('SELECT pg_stat_force_next_flush()');
}

async function dueSteps(pglite: PGlite, minIntervalMs: number): Promise<DueStep[]> {
  await flushStatistics(pglite);
  const { rows } = await pglite.query<{ table: string; vacuum: boolean; rows: number }>(
    `WITH due AS (
       SELECT s.schemaname, s.relname, format('%I.%I', s.schemaname, s.relname) AS table, c.reltuples,
              s.n_mod_since_analyze > $1 + $2 * greatest(c.reltuples, 0)
                AND (s.last_analyze IS NULL OR s.last_analyze <= clock_timestamp() - $5 * interval '1 millisecond'
                     OR s.n_live_tup > 2 * greatest(c.reltuples, 0)) AS analyze_due,
              s.n_dead_tup > $3 + $4 * greatest(c.reltuples, 0)
                AND (s.last_vacuum IS NULL OR s.last_vacuum <= clock_timestamp() - $5 * interval '1 millisecond')
                AS vacuum_due
         FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
     )
     SELECT "table", vacuum_due AS vacuum, reltuples::float8 AS rows
       FROM due WHERE analyze_due OR vacuum_due ORDER BY schemaname, relname`,
    [ANALYZE_THRESHOLD, ANALYZE_SCALE_FACTOR, VACUUM_THRESHOLD, VACUUM_SCALE_FACTOR, minIntervalMs],
  );
  return rows.map((row) => ({ table: row.table, action: row.vacuum ? 'vacuum' : 'analyze', rows: row.rows }));
}

/**
 * The tables due for maintenance now, and what each needs. `minIntervalMs`: how long after a
 * table's last ANALYZE (or VACUUM) it may have the next one, unless its rows more than doubled.
 */
export async function tablesDueForMaintenance(
  pglite: PGlite,
  minIntervalMs = EMBEDDED_MAINTENANCE_MIN_INTERVAL_MS,
): Promise<MaintenanceStep[]> {
  return (await dueSteps(pglite, minIntervalMs)).map(({ table, action }) => ({ table, action }));
}

/** Milliseconds the session has spent running statements since the database's statistics began. */
async function activeTimeMs(pglite: PGlite): Promise<number> {
  const { rows } = await pglite.query<{ active_time: number }>(
    'SELECT active_time FROM pg_stat_database WHERE datname = current_database()',
  );
  return rows[0]?.active_time ?? 0;
}

/** What the passes of one database remember between looks: how busy it was, who waits since when. */
export interface MaintenancePacing {
  /** The clock (ms) and the session's active time at the last look; none before the first. */
  last?: { at: number; activeMs: number };
  /** Since when (clock ms) each waiting step of a large table has been due, by table and action. */
  readonly waitingSince: Map<string, number>;
  /** The clock, in milliseconds. */
  readonly now: () => number;
  /** The longest a step waits for a quiet look. */
  readonly maxWaitMs: number;
}

export function createMaintenancePacing(
  options: { now?: () => number; maxWaitMs?: number } = {},
): MaintenancePacing {
  return {
    waitingSince: new Map(),
    now: options.now ?? (() => performance.now()),
    maxWaitMs: options.maxWaitMs ?? EMBEDDED_MAINTENANCE_MAX_WAIT_MS,
  };
}

/**
 * One pass: analyzes or vacuums every table due, and returns what it did. With `pacing` (the
 * service's passes), a large table's step waits for a quiet look (see above); without it, every
 * due step runs now.
 */
export async function runEmbeddedAutovacuum(
  pglite: PGlite,
  options: { pacing?: MaintenancePacing; minIntervalMs?: number } = {},
): Promise<MaintenanceStep[]> {
  const { pacing } = options;
  const due = await dueSteps(pglite, options.minIntervalMs ?? EMBEDDED_MAINTENANCE_MIN_INTERVAL_MS);
  let steps: DueStep[] = due;
  if (pacing) {
    const at = pacing.now();
    // The statistics were published just before the look at the tables.
    const activeMs = await activeTimeMs(pglite);
    const { last } = pacing;
    const quiet = last !== undefined && activeMs - last.activeMs <= QUIET_ACTIVE_SHARE * (at - last.at);
    pacing.last = { at, activeMs };
    const keyOf = (step: MaintenanceStep) => `${step.action} ${step.table}`;
    const dueKeys = new Set(due.map(keyOf));
    for (const key of pacing.waitingSince.keys()) if (!dueKeys.has(key)) pacing.waitingSince.delete(key);
    steps = due.filter((step) => {
      if (step.rows < LARGE_TABLE_ROWS) return true;
      const key = keyOf(step);
      const since = pacing.waitingSince.get(key) ?? at;
      if (quiet || at - since >= pacing.maxWaitMs) {
        pacing.waitingSince.delete(key);
        return true;
      }
      pacing.waitingSince.set(key, since);
      return false;
    });
  }
  for (const step of steps) {
    // The table name comes from format('%I.%I'), quoted by PostgreSQL itself. VACUUM refuses a
    // transaction block, so it goes as a simple-protocol statement of its own.
    await pglite.exec(step.action === 'vacuum' ? `VACUUM (ANALYZE) ${step.table}` : `ANALYZE ${step.table}`);
  }
  if (pacing && steps.length > 0) {
    // The pass's own steps do not make the next look busy.
    await flushStatistics(pglite);
    pacing.last = { at: pacing.now(), activeMs: await activeTimeMs(pglite) };
  }
  return steps.map(({ table, action }) => ({ table, action }));
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
  const pacing = createMaintenancePacing();
  const timer = setInterval(() => {
    if (running || stopped || pglite.closed) return;
    running = runEmbeddedAutovacuum(pglite, { pacing })
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

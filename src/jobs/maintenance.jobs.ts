import { sql } from 'kysely';
import { Type } from 'typebox';
import type { Executor } from '../db/types.ts';
import { defineJob, type JobQueue } from './queue.ts';

/**
 * Instance maintenance: the one kind of job whose statements span accounts, because it cleans up
 * after every account at once.
 */

export const purgeIdempotencyKeysJob = defineJob(
  'maintenance.purge-idempotency-keys',
  Type.Object({}, { additionalProperties: false }),
);

/** Hourly, at minute 17 (UTC): off the full hour, when other installations' cron jobs pile up. */
export const PURGE_IDEMPOTENCY_KEYS_CRON = '17 * * * *';

/** Rows per DELETE: a big backlog is cleared in short statements, none holding locks for long. */
const PURGE_BATCH_SIZE = 5_000;

/** Runs `deleteBatch` until it deletes fewer than a batch; returns how many went in all. */
async function inBatches(deleteBatch: () => Promise<{ numDeletedRows: bigint }>): Promise<number> {
  let deleted = 0;
  for (;;) {
    const batch = Number((await deleteBatch()).numDeletedRows);
    deleted += batch;
    if (batch < PURGE_BATCH_SIZE) return deleted;
  }
}

/** Deletes idempotency keys past their 24 hours (decisions §4); returns how many went. */
export function purgeExpiredIdempotencyKeys(executor: Executor): Promise<number> {
  return inBatches(() =>
    executor
      .deleteFrom('idempotency_keys')
      .where((eb) =>
        eb(
          eb.refTuple('account_id', 'scope', 'key'),
          'in',
          eb
            .selectFrom('idempotency_keys')
            .select(['account_id', 'scope', 'key'])
            .where('expires_at', '<', sql<Date>`now()`)
            .limit(PURGE_BATCH_SIZE)
            .$asTuple('account_id', 'scope', 'key'),
        ),
      )
      .executeTakeFirst(),
  );
}

export const purgeAutomationRunsJob = defineJob(
  'maintenance.purge-automation-runs',
  Type.Object({}, { additionalProperties: false }),
);

/** Hourly, at minute 47 (UTC), apart from the other purges. */
export const PURGE_AUTOMATION_RUNS_CRON = '47 * * * *';

/**
 * How long an automation run's mark is kept: longer than the job queue keeps a job that has not
 * finished (14 days), so that no retry of a run can come after its mark is gone.
 */
export const AUTOMATION_RUN_MARK_DAYS = 30;

/**
 * Deletes automation run marks past their time (decisions: CRM module), and the move counts of
 * automation chains as old (no job of the chain can come after them); returns how many marks went.
 */
export async function purgeAutomationRuns(executor: Executor): Promise<number> {
  await purgeOlderThanMarks(executor, 'automation_chains');
  return purgeOlderThanMarks(executor, 'automation_runs');
}

/** Deletes, a batch at a time, the rows of `table` older than a run mark is kept; returns how many went. */
function purgeOlderThanMarks(executor: Executor, table: 'automation_runs' | 'automation_chains') {
  return inBatches(() =>
    executor
      .deleteFrom(table)
      .where((eb) =>
        eb(
          eb.refTuple('account_id', 'id'),
          'in',
          eb
            .selectFrom(table)
            .select(['account_id', 'id'])
            .where('created_at', '<', sql<Date>`now() - make_interval(days => ${AUTOMATION_RUN_MARK_DAYS})`)
            .limit(PURGE_BATCH_SIZE)
            .$asTuple('account_id', 'id'),
        ),
      )
      .executeTakeFirst(),
  );
}

/** The maintenance jobs every worker runs, and their schedules. */
export function registerMaintenanceJobs(queue: JobQueue, db: Executor): void {
  queue.registerHandler(purgeIdempotencyKeysJob, async () => ({
    deleted: await purgeExpiredIdempotencyKeys(db),
  }));
  queue.schedule(purgeIdempotencyKeysJob, PURGE_IDEMPOTENCY_KEYS_CRON, {});
  queue.registerHandler(purgeAutomationRunsJob, async () => ({ deleted: await purgeAutomationRuns(db) }));
  queue.schedule(purgeAutomationRunsJob, PURGE_AUTOMATION_RUNS_CRON, {});
}

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

/** Deletes idempotency keys past their 24 hours (decisions §4); returns how many went. */
export async function purgeExpiredIdempotencyKeys(executor: Executor): Promise<number> {
  let deleted = 0;
  for (;;) {
    const result = await executor
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
      .executeTakeFirst();
    const batch = Number(result.numDeletedRows);
    deleted += batch;
    if (batch < PURGE_BATCH_SIZE) return deleted;
  }
}

/** The maintenance jobs every worker runs, and their schedules. */
export function registerMaintenanceJobs(queue: JobQueue, db: Executor): void {
  queue.registerHandler(purgeIdempotencyKeysJob, async () => ({
    deleted: await purgeExpiredIdempotencyKeys(db),
  }));
  queue.schedule(purgeIdempotencyKeysJob, PURGE_IDEMPOTENCY_KEYS_CRON, {});
}

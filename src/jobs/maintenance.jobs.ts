import { sql } from 'kysely';
import type { Db } from '../db/types.ts';
import type { Queue } from './queue.ts';

export const PURGE_IDEMPOTENCY_KEYS = 'maintenance.purge-idempotency-keys';

/** Deletes idempotency keys past their 24 hours (decisions §4); returns how many. */
export async function purgeExpiredIdempotencyKeys(db: Db): Promise<number> {
  const result = await db
    .deleteFrom('idempotency_keys')
    .where('expires_at', '<', sql<Date>`now()`)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** The maintenance jobs every worker knows. */
export function registerMaintenanceJobs(queue: Queue, db: Db): void {
  queue.register(PURGE_IDEMPOTENCY_KEYS, async () => {
    await purgeExpiredIdempotencyKeys(db);
  });
  queue.schedule(PURGE_IDEMPOTENCY_KEYS, '17 * * * *');
}

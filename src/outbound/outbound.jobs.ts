import { Type } from 'typebox';
import { defineJob, type JobQueue } from '../jobs/queue.ts';
import type { OutboundService } from './outbound.service.ts';

/** Messages and their attempts are kept 30 days (decisions §12: what a user reads when asking why). */
export const OUTBOUND_RETENTION_MS = 30 * 86_400_000;

export const pruneOutboundMessagesJob = defineJob(
  'maintenance.prune-outbound-messages',
  Type.Object({}, { additionalProperties: false }),
);

/** Hourly at minute 37 (UTC), away from the idempotency purge at minute 17. */
export const PRUNE_OUTBOUND_MESSAGES_CRON = '37 * * * *';

export function registerOutboundJobs(queue: JobQueue, outbound: OutboundService): void {
  queue.registerHandler(pruneOutboundMessagesJob, async () => ({
    deleted: await outbound.prune(OUTBOUND_RETENTION_MS),
  }));
  queue.schedule(pruneOutboundMessagesJob, PRUNE_OUTBOUND_MESSAGES_CRON, {});
}

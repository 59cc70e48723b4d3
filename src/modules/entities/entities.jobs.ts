import { Type } from 'typebox';
import { defineJob, type JobQueue } from '../../jobs/queue.ts';
import type { EntitiesService } from './entities.service.ts';

/**
 * Recomputes the stored duplicate keys of an entity's records after its duplicate rule changed,
 * in batches whose progress is stored on the entity row (resumable). `version` is the rule's;
 * a newer change makes the job stop.
 */
const UUID = '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';

export const recomputeDuplicateKeysJob = defineJob(
  'entities.recompute-duplicate-keys',
  Type.Object(
    {
      accountId: Type.String({ pattern: UUID }),
      entityId: Type.String({ pattern: UUID }),
      version: Type.Integer({ minimum: 1 }),
    },
    { additionalProperties: false },
  ),
);

export function registerEntityJobs(queue: JobQueue, entities: EntitiesService): void {
  queue.registerHandler(recomputeDuplicateKeysJob, (payload, job) =>
    entities.recomputeDuplicateKeys(payload, job.signal),
  );
}

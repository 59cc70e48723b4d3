import { Type } from 'typebox';
import { defineJob, type JobQueue } from '../../jobs/queue.ts';
import type { AutomationsService } from './automations.service.ts';

const UUID = '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';

/** One automation for one move, enqueued in the move's transaction (decisions §7). */
export const runAutomationJob = defineJob(
  'crm.run-automation',
  Type.Object(
    {
      accountId: Type.String({ pattern: UUID }),
      recordId: Type.String({ pattern: UUID }),
      automationId: Type.String({ pattern: UUID }),
      /** The stage the move entered (`{{stage}}`), as named then. */
      stage: Type.String({ maxLength: 200 }),
      /** Moves automations made before this one, from the request's move. */
      chain: Type.Integer({ minimum: 0 }),
    },
    { additionalProperties: false },
  ),
);

export function registerAutomationJobs(queue: JobQueue, automations: AutomationsService): void {
  queue.registerHandler(runAutomationJob, (payload, job) => automations.run(job.id, payload));
}

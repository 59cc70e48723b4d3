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
      /** That stage's id and its pipeline's name then; absent in jobs written before they were added. */
      stageId: Type.Optional(Type.String({ pattern: UUID })),
      pipeline: Type.Optional(Type.String({ maxLength: 200 })),
      /** When the move entered that stage (its `crm.entered_at`); absent in jobs written before it was added. */
      enteredAt: Type.Optional(Type.String({ maxLength: 40 })),
      /** Moves automations made before this one, from the request's move (the chain's depth). */
      chain: Type.Integer({ minimum: 0 }),
      /** The chain whose automation moves count toward the limit (decisions §7): minted by the request's move. */
      origin: Type.Optional(Type.String({ pattern: UUID })),
    },
    { additionalProperties: false },
  ),
  {},
  // Every stage move into a stage with automations writes such jobs: a worker takes up to 16 at
  // once, and fetches again at once while it finds them, instead of one per poll (every 2 s).
  { batchSize: 16 },
);

export function registerAutomationJobs(queue: JobQueue, automations: AutomationsService): void {
  queue.registerHandler(runAutomationJob, (payload, job) => automations.run(job.id, payload));
}

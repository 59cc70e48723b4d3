import { flushCompileCache } from 'node:module';
import pino from 'pino';
import type { Config } from '../config.ts';
import { registerMaintenanceJobs } from '../jobs/maintenance.jobs.ts';
import type { JobLogger, JobQueue } from '../jobs/queue.ts';
import { registerAutomationJobs } from '../modules/crm/automations.jobs.ts';
import { registerEntityJobs } from '../modules/entities/entities.jobs.ts';
import { createDispatcher } from '../outbound/dispatcher.ts';
import { registerOutboundJobs } from '../outbound/outbound.jobs.ts';
import { firstStartSecretsNotice } from './bootstrap.ts';
import { openRuntime, type Runtime } from './runtime.ts';

type WorkerRuntime = Pick<Runtime, 'queue' | 'database' | 'services'>;

/**
 * Registers the handler (and schedule) of every job this service knows on the runtime's queue
 * (a job can be written only once it is registered). A module with jobs registers them here.
 */
export function registerJobs({ queue, database, services }: WorkerRuntime): void {
  registerMaintenanceJobs(queue, database.db);
  registerOutboundJobs(queue, services.outbound);
  registerEntityJobs(queue, services.entities);
  registerAutomationJobs(queue, services.automations);
}

/**
 * The runtime's queue with every job registered and the outbound dispatcher beside it: for
 * `serve`, which starts it working or, with LEADS_RUN_WORKERS=false, only enqueuing, and for
 * `leads worker`.
 */
export function createWorkers(runtime: WorkerRuntime, logger: JobLogger): JobQueue {
  const { queue } = runtime;
  registerJobs(runtime);
  // Outbound messages are sent by their own dispatcher (docs/decisions.md, Outbound messages),
  // which starts and stops with the queue on the nodes that work it.
  const dispatcher = createDispatcher(runtime.services.outbound, logger);
  let dispatching = false;
  return {
    ...queue,
    async start(options) {
      await queue.start(options);
      dispatching = options?.work ?? queue.works;
      if (dispatching) dispatcher.start();
    },
    async stop(timeoutMs) {
      if (dispatching) await dispatcher.stop(timeoutMs);
      runtime.services.outbound.close();
      await queue.stop(timeoutMs);
    },
  };
}

/**
 * `leads worker`: the background workers alone, until SIGTERM or SIGINT; then running jobs finish
 * (up to LEADS_SHUTDOWN_TIMEOUT_MS) before the database closes.
 */
export async function runWorkerUntilSignal(config: Config): Promise<void> {
  const logger = pino({ level: config.logLevel });
  // Handlers go in before the start, so that a signal during start-up (migrations, queue
  // install) still leads to a clean stop once everything is open, not to a hard exit.
  let signalled: () => void = () => {};
  const signal = new Promise<void>((resolve) => {
    signalled = resolve;
  });
  const onSignal = (name: NodeJS.Signals) => {
    logger.info({ signal: name }, 'worker stopping: finishing running jobs');
    signalled();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    const runtime = await openRuntime(config, { logger, works: true });
    // The first process on a new database generates the operator token, whichever it is: a
    // worker started before any server must show it, or it is lost (only its hash is stored).
    if (runtime.secrets.newAdminToken) {
      const heading = 'This first start created the operator token; it is shown only now:';
      process.stdout.write(
        `${firstStartSecretsNotice(heading, { adminToken: runtime.secrets.newAdminToken })}\n`,
      );
    }
    runtime.database.onMaintenanceError = (error) =>
      logger.warn({ err: error }, 'embedded database maintenance failed');
    try {
      const queue = createWorkers(runtime, logger);
      try {
        await queue.start();
        logger.info('worker started');
        // As the server does: the compile cache is written now, not only at exit (bin/leads.js).
        flushCompileCache?.();
        await signal;
      } finally {
        await queue.stop(config.shutdownTimeoutMs);
      }
    } finally {
      await runtime.database.close();
    }
    logger.info('worker stopped');
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

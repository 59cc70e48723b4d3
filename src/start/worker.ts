import { flushCompileCache } from 'node:module';
import pino from 'pino';
import type { Config } from '../config.ts';
import { registerMaintenanceJobs } from '../jobs/maintenance.jobs.ts';
import { createJobQueue, type JobLogger, type JobQueue } from '../jobs/queue.ts';
import { createDispatcher } from '../outbound/dispatcher.ts';
import { registerOutboundJobs } from '../outbound/outbound.jobs.ts';
import { openRuntime, type Runtime } from './runtime.ts';

/**
 * The queue with the handler (and schedule) of every job this service knows: for `serve`, beside
 * the server, and for `leads worker`. A module with jobs registers them here.
 */
export function createWorkers(runtime: Runtime, logger: JobLogger): JobQueue {
  const queue = createJobQueue(runtime.database, { logger });
  registerMaintenanceJobs(queue, runtime.database.db);
  registerOutboundJobs(queue, runtime.services.outbound);
  // Outbound messages are sent by their own dispatcher (docs/decisions.md, Outbound messages),
  // which starts and stops with the queue.
  const dispatcher = createDispatcher(runtime.services.outbound, logger);
  return {
    ...queue,
    async start(options) {
      await queue.start(options);
      if (options?.work !== false) dispatcher.start();
    },
    async stop(timeoutMs) {
      await dispatcher.stop(timeoutMs);
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
    const runtime = await openRuntime(config);
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

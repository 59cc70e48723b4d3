import pino from 'pino';
import type { Config } from '../config.ts';
import { registerMaintenanceJobs } from '../jobs/maintenance.jobs.ts';
import { createQueue, type Queue } from '../jobs/queue.ts';
import type { Runtime } from './runtime.ts';
import { openRuntime } from './runtime.ts';

/** The queue with every job this service knows, for `serve` (beside the server) and `worker`. */
export function createWorkers(runtime: Runtime, logger: pino.Logger): Queue {
  const queue = createQueue(runtime.database, { logger });
  registerMaintenanceJobs(queue, runtime.database.db);
  return queue;
}

/** `leads worker`: background jobs alone, until SIGTERM or SIGINT. */
export async function runWorkerUntilSignal(config: Config): Promise<void> {
  const logger = pino({ level: config.logLevel });
  const runtime = await openRuntime(config);
  const queue = createWorkers(runtime, logger);
  try {
    await queue.start();
    logger.info('worker started');
    await new Promise<void>((resolve) => {
      const onSignal = () => {
        process.off('SIGTERM', onSignal);
        process.off('SIGINT', onSignal);
        resolve();
      };
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    });
    logger.info('worker stopping: finishing running jobs');
  } finally {
    await queue.stop(config.shutdownTimeoutMs);
    await runtime.database.close();
  }
}

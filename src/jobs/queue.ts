import type { FastifyBaseLogger } from 'fastify';
import { fromKysely, fromPglite, PgBoss } from 'pg-boss';
import type { DatabaseHandle } from '../db/client.ts';
import type { Executor } from '../db/types.ts';

/**
 * The durable job queue (pg-boss, in the schema `pgboss` of the service's own database).
 *
 * - `enqueue(executor, name, payload)` writes a job through the caller's Kysely transaction, so
 *   the job exists only if the write that causes it commits.
 * - `register(name, handler)` declares what a worker does with a job; `start()` creates the
 *   queues and, unless told otherwise, starts working them; `stop()` finishes running jobs.
 * - `schedule(name, cron)` runs a job on a schedule (one instance fires it across all nodes).
 *
 * On PostgreSQL pg-boss keeps a small pool of its own from the same URL, so that long polling
 * never takes connections from requests; on the embedded database it shares the one PGlite
 * connection (pg-boss's `pglite` backend), whose transactions are exclusive.
 */

export type JobHandler<T> = (payload: T, job: { id: string; retryCount: number }) => Promise<void>;

export interface QueueOptions {
  logger?: FastifyBaseLogger;
  /** Seconds between polls for new jobs. */
  pollingIntervalSeconds?: number;
}

/** Retries with exponential backoff: 5 attempts after the first, 10 s growing (decisions). */
const RETRY = { retryLimit: 5, retryDelay: 10, retryBackoff: true } as const;
const SCHEMA = 'pgboss';

export function createQueue(database: DatabaseHandle, options: QueueOptions = {}) {
  const boss =
    database.kind === 'pglite'
      ? new PgBoss({ db: fromPglite(database.pglite as never), backend: 'pglite', schema: SCHEMA })
      : new PgBoss({ connectionString: database.url, schema: SCHEMA, max: 3 });
  const handlers = new Map<string, JobHandler<never>>();
  const schedules: { name: string; cron: string }[] = [];
  let started = false;
  boss.on('error', (error) => options.logger?.error({ err: error }, 'job queue error'));

  return {
    register<T>(name: string, handler: JobHandler<T>) {
      handlers.set(name, handler as JobHandler<never>);
    },

    schedule(name: string, cron: string) {
      schedules.push({ name, cron });
    },

    /** Installs or migrates the queue schema, creates the queues, and works them if `work`. */
    async start({ work = true }: { work?: boolean } = {}) {
      await boss.start();
      started = true;
      for (const name of handlers.keys()) await boss.createQueue(name, { ...RETRY });
      for (const { name, cron } of schedules) await boss.schedule(name, cron);
      if (!work) return;
      for (const [name, handler] of handlers) {
        await boss.work<object>(
          name,
          { pollingIntervalSeconds: options.pollingIntervalSeconds ?? 2, batchSize: 1 },
          async (jobs) => {
            for (const job of jobs) {
              const started = Date.now();
              try {
                await handler(job.data as never, {
                  id: job.id,
                  retryCount: (job as { retryCount?: number }).retryCount ?? 0,
                });
                options.logger?.info({ job: name, jobId: job.id, ms: Date.now() - started }, 'job done');
              } catch (error) {
                options.logger?.warn(
                  { job: name, jobId: job.id, err: error },
                  'job failed; it will be retried',
                );
                throw error;
              }
            }
          },
        );
      }
    },

    /** Writes a job in the caller's transaction (or on its own when given the pool). */
    async enqueue(
      executor: Executor,
      name: string,
      payload: object,
      sendOptions: { startAfter?: number } = {},
    ) {
      return boss.send(name, payload, { ...RETRY, ...sendOptions, db: fromKysely(executor as never) });
    },

    /** Stops taking jobs, lets running ones finish (up to `timeoutMs`), and closes the queue's connections. */
    async stop(timeoutMs = 10_000) {
      if (!started) return;
      started = false;
      await boss.stop({ graceful: true, timeout: timeoutMs, close: true });
    },

    boss,
  };
}

export type Queue = ReturnType<typeof createQueue>;

/**
 * The durable background job queue: pg-boss, in the schema `pgboss` of the service's own database.
 *
 * How a module uses it:
 *
 * 1. Declare each job once, beside the code that handles it; the TypeBox schema types the payload
 *    and is checked when the job is enqueued and again before the handler runs:
 *
 *        export const runAutomation = defineJob(
 *          'crm.run-automation',
 *          Type.Object({ accountId: Type.String(), automationId: Type.String() }),
 *        );
 *
 * 2. Register its handler where the workers are wired (`registerJobs` in src/start/worker.ts):
 *
 *        queue.registerHandler(runAutomation, async (payload, job) => ({ ran: true }));
 *
 *    A handler that throws is retried with backoff (DEFAULT_RETRY_POLICY, or the job's own);
 *    whatever it returns is stored as the job's output. Success and failure are logged.
 *
 * 3. Enqueue it in the transaction of the write that causes it:
 *
 *        await db.transaction().execute(async (tx) => {
 *          await moveStage(accountId, recordId, stage, tx);
 *          await queue.enqueue(tx, runAutomation, { accountId, automationId });
 *        });
 *
 *    The job exists only if that transaction commits. Never enqueue from inside a handler's
 *    or request's transaction a job that is not registered: `enqueue` refuses it at once.
 *
 * Services that enqueue take the queue as a dependency (`JobEnqueuer`, wired in src/services.ts).
 * Every process that serves starts it (src/start/runtime.ts creates it, `createWorkers` registers
 * every job): `serve` works it unless LEADS_RUN_WORKERS=false, and then still starts it with
 * `work: false` so that its requests can enqueue; `leads worker` works it. The test app starts
 * one only when a test asks for it (`startTestApp(kind, { queue: {} })`).
 *
 * On PostgreSQL pg-boss keeps a small pool of its own from the same DATABASE_URL, so that polling
 * and maintenance never wait for, or take, a connection a request needs. On the embedded database
 * it shares the one PGlite instance through `pgliteQueueDatabase` (see there why not pg-boss's own
 * `fromPglite`).
 */
import { createRequire } from 'node:module';
import { CompiledQuery } from 'kysely';
import { type JobResult, type JobWithMetadata, PgBoss, type Db as QueueDatabase } from 'pg-boss';
import type pino from 'pino';
import type { Static, TSchema } from 'typebox';
// The schema checker alone (what `Value.Check` and `Value.Errors` run), not `typebox/value`,
// which brings every value operation (about 140 modules more) that the queue does not use.
import { Check, Errors } from 'typebox/schema';
import type { DatabaseHandle } from '../db/client.ts';
import { PREPARED_MARK } from '../db/prepared.ts';
import type { Executor } from '../db/types.ts';
import { runInBackground } from './background.ts';
import { pgliteQueueDatabase } from './pglite-adapter.ts';

export const QUEUE_SCHEMA = 'pgboss';

/** How often a failed job is tried again, and how long an attempt may run. */
export interface RetryPolicy {
  /** Attempts after the first. */
  retryLimit: number;
  /** Wait before the first retry; with backoff it roughly doubles for each further one. */
  retryDelaySeconds: number;
  retryBackoff: boolean;
  /** Upper bound of the wait between two attempts (with backoff). */
  retryDelayMaxSeconds: number;
  /** An attempt still running after this long counts as failed (its process probably died). */
  expireInSeconds: number;
}

/**
 * Five retries: the first 10–20 s after the failure, each further wait twice as long (random
 * within that doubling, so that retries of many jobs spread out), at most 10 minutes; the last
 * attempt comes 5 to 10 minutes after the first. Jobs that call out (webhooks, email) set their own.
 */
export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({
  retryLimit: 5,
  retryDelaySeconds: 10,
  retryBackoff: true,
  retryDelayMaxSeconds: 600,
  expireInSeconds: 900,
});

export interface JobDefinition<Schema extends TSchema> {
  readonly name: string;
  readonly payload: Schema;
  readonly retry: Readonly<RetryPolicy>;
  /**
   * Jobs a worker takes at once and runs side by side (1 by default). Above 1 the worker fetches
   * again at once while fetches come back full, instead of waiting for its next poll: a job that
   * every request can cause (an automation per stage move) must not be worked one per poll.
   */
  readonly batchSize: number;
}

/** Dotted lower-case names (`area.what-it-does`); pg-boss writes the name into its SQL text. */
const JOB_NAME = /^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)*$/;
const MAX_JOB_NAME_LENGTH = 100;

/** At most this many jobs are fetched and run at once per job and process. */
const MAX_BATCH_SIZE = 64;

export function defineJob<Schema extends TSchema>(
  name: string,
  payload: Schema,
  retry: Partial<RetryPolicy> = {},
  work: { batchSize?: number } = {},
): JobDefinition<Schema> {
  const batchSize = work.batchSize ?? 1;
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > MAX_BATCH_SIZE) {
    throw new Error(`job ${name}: batchSize must be a whole number from 1 to ${MAX_BATCH_SIZE}`);
  }
  if (name.length > MAX_JOB_NAME_LENGTH || !JOB_NAME.test(name)) {
    throw new Error(
      `job name "${name}" must be dotted lower-case words, at most ${MAX_JOB_NAME_LENGTH} characters`,
    );
  }
  return Object.freeze({
    name,
    payload,
    retry: Object.freeze({ ...DEFAULT_RETRY_POLICY, ...retry }),
    batchSize,
  });
}

/** What a handler learns about the attempt it runs. */
export interface JobContext {
  id: string;
  /** 1 for the first attempt. */
  attempt: number;
  /** Aborted when the worker gives up on the attempt (shutdown past its grace period). */
  signal: AbortSignal;
}

/** Stored as the job's output and logged. */
export type JobOutput = Record<string, unknown>;

export type JobHandler<Payload> = (payload: Payload, context: JobContext) => Promise<JobOutput | undefined>;

export interface EnqueueOptions {
  /** Run no earlier than this. */
  startAfter?: Date;
  /** At most one queued job per key: a second enqueue with the same key is dropped (returns null). */
  singletonKey?: string;
}

/** The part of the queue that services need: writing jobs. */
export interface JobEnqueuer {
  /**
   * Writes a job through `executor` (the caller's transaction, or the pool). Returns its id, or
   * null when `singletonKey` matched a job already queued.
   */
  enqueue<Schema extends TSchema>(
    executor: Executor,
    job: JobDefinition<Schema>,
    payload: Static<Schema>,
    options?: EnqueueOptions,
  ): Promise<string | null>;
}

export type JobState = 'created' | 'retry' | 'active' | 'completed' | 'cancelled' | 'failed';

export interface JobStatus {
  id: string;
  state: JobState;
  /** Attempts started after the first. */
  retryCount: number;
  retryLimit: number;
  /** When the next attempt may start (or the first, or the last one started). */
  startAfter: Date;
  output: unknown;
}

export interface JobQueue extends JobEnqueuer {
  /** Whether this queue was created to work jobs (false: an API-only node that only enqueues). */
  readonly works: boolean;
  registerHandler<Schema extends TSchema>(
    job: JobDefinition<Schema>,
    handler: JobHandler<Static<Schema>>,
  ): void;
  /** Runs `job` on a cron schedule (UTC); one instance fires each occurrence across all nodes. */
  schedule<Schema extends TSchema>(job: JobDefinition<Schema>, cron: string, payload: Static<Schema>): void;
  /**
   * Installs or upgrades the queue schema (idempotent), creates the registered jobs' queues,
   * brings their retry policies and schedules up to date and, when `work`, starts working them.
   */
  start(options?: { work?: boolean }): Promise<void>;
  /** Stops taking jobs, waits up to `timeoutMs` for running ones, and closes the queue's connections. */
  stop(timeoutMs?: number): Promise<void>;
  /** The job's state, or null when it does not exist (any more). */
  getJob<Schema extends TSchema>(job: JobDefinition<Schema>, id: string): Promise<JobStatus | null>;
}

/** Pino's log methods; a Fastify logger is one too. */
export type JobLogger = Pick<pino.BaseLogger, 'info' | 'warn' | 'error'>;

export interface JobQueueOptions {
  logger: JobLogger;
  /** Seconds between two polls of an idle queue (at least 0.5). */
  pollingIntervalSeconds?: number;
  /**
   * Whether this process will work jobs (default true). A process that only enqueues (an API-only
   * node) leaves pg-boss's maintenance and cron pass to the workers and keeps one connection.
   */
  works?: boolean;
}

/** pg-boss's connections on PostgreSQL: enough for polling, maintenance and the cron pass at once. */
const POSTGRES_POOL_SIZE = 3;
/** A process that only enqueues: jobs are written through the caller's executor. */
const ENQUEUE_ONLY_POOL_SIZE = 1;

/**
 * Runs pg-boss's statements through a Kysely executor, so they take part in its transaction. Only
 * `send` comes this way, and its text is fixed per queue (the queue's name is written into it),
 * so it is run prepared: parsing and planning that wide insert cost about four times what running
 * it did (0.6–0.9 ms against 0.13–0.17 ms per job on PostgreSQL, see Benchmark).
 */
function executorQueueDatabase(executor: Executor): QueueDatabase {
  return {
    async executeSql(text: string, values: unknown[] = []) {
      const result = await executor.executeQuery(CompiledQuery.raw(`${text} ${PREPARED_MARK}`, values));
      return { rows: [...result.rows] };
    },
  };
}

// pg-boss checks every schedule with cron-parser, which reads the time through Luxon's CommonJS
// build (a copy of its own: the service's booking code imports the ES build, with Settings of its
// own). Asked for the system's locale and time zone, that Luxon builds an Intl.DateTimeFormat, and
// the first one makes V8 read ICU's locale data out of the Node binary: about 7 MB more resident
// memory for the life of every serving process (docs/decisions.md, Runtime and storage). Every
// schedule here is in UTC (pg-boss is given tz 'UTC'), so naming the locale and zone outright
// changes no occurrence and leaves Intl untouched.
{
  const { Settings } = createRequire(import.meta.url)('luxon') as typeof import('luxon');
  Settings.defaultLocale = 'en-US';
  Settings.defaultZone = 'utc';
}

function createBoss(database: DatabaseHandle, works: boolean): PgBoss {
  const maintenance = { supervise: works, schedule: works };
  if (database.kind === 'pglite') {
    if (!database.pglite) throw new Error('the embedded database handle carries no PGlite instance');
    return new PgBoss({
      db: pgliteQueueDatabase(database.pglite),
      backend: 'pglite',
      schema: QUEUE_SCHEMA,
      ...maintenance,
    });
  }
  if (!database.url) throw new Error('the PostgreSQL database handle carries no connection string');
  return new PgBoss({
    ...maintenance,
    connectionString: database.url,
    max: works ? POSTGRES_POOL_SIZE : ENQUEUE_ONLY_POOL_SIZE,
    application_name: 'leadline-jobs',
    schema: QUEUE_SCHEMA,
  });
}

/** pg-boss's options for a queue; it takes a bound on the wait only together with backoff. */
function queueSettings(retry: Readonly<RetryPolicy>) {
  const settings = {
    retryLimit: retry.retryLimit,
    retryDelay: retry.retryDelaySeconds,
    retryBackoff: retry.retryBackoff,
    expireInSeconds: retry.expireInSeconds,
  };
  return retry.retryBackoff ? { ...settings, retryDelayMax: retry.retryDelayMaxSeconds } : settings;
}

function assertPayload(job: JobDefinition<TSchema>, payload: unknown): void {
  if (Check(job.payload, payload)) return;
  const [, [first]] = Errors(job.payload, payload);
  throw new Error(
    `payload of job ${job.name} does not match its schema: ${first?.instancePath || '/'} ${first?.message ?? ''}`.trim(),
  );
}

function errorSummary(error: unknown): { name: string; message: string } {
  return error instanceof Error
    ? { name: error.name, message: error.message }
    : { name: 'Error', message: String(error) };
}

interface Registration {
  job: JobDefinition<TSchema>;
  handler: JobHandler<unknown>;
}

export function createJobQueue(database: DatabaseHandle, options: JobQueueOptions): JobQueue {
  const { logger } = options;
  const works = options.works ?? true;
  const boss = createBoss(database, works);
  const registrations = new Map<string, Registration>();
  const schedules = new Map<string, { cron: string; payload: unknown }>();
  /** pg-boss started (so it must be stopped), and the queues exist (so jobs may be written). */
  let bossStarted = false;
  let ready = false;

  boss.on('error', (error) => logger.error({ err: error }, 'job queue error'));
  boss.on('warning', (warning) => logger.warn({ warning }, 'job queue warning'));

  async function runAttempt(
    registration: Registration,
    job: JobWithMetadata<unknown>,
  ): Promise<JobResult<JobOutput>> {
    const { name } = registration.job;
    const startedAt = performance.now();
    const attempt = job.retryCount + 1;
    const facts = { job: name, jobId: job.id, attempt };
    if (!Check(registration.job.payload, job.data)) {
      // Another try cannot make a malformed payload fit: fail the job for good.
      const [, [first]] = Errors(registration.job.payload, job.data);
      logger.error(
        { ...facts, path: first?.instancePath, reason: first?.message },
        'job payload invalid; not retried',
      );
      return {
        id: job.id,
        status: 'deadletter',
        output: { error: 'invalid_payload', reason: first?.message },
      };
    }
    try {
      const output = await runInBackground(() =>
        registration.handler(job.data, { id: job.id, attempt, signal: job.signal }),
      );
      logger.info({ ...facts, ms: Math.round(performance.now() - startedAt), output }, 'job completed');
      return { id: job.id, status: 'completed', output };
    } catch (error) {
      const retriesLeft = job.retryLimit - job.retryCount;
      const details = { ...facts, ms: Math.round(performance.now() - startedAt), retriesLeft, err: error };
      if (retriesLeft > 0) logger.warn(details, 'job failed; it will be retried');
      else logger.error(details, 'job failed; no retries left');
      return { id: job.id, status: 'failed', output: errorSummary(error) };
    }
  }

  return {
    registerHandler(job, handler) {
      if (bossStarted) throw new Error(`register job ${job.name} before the queue starts`);
      if (registrations.has(job.name)) throw new Error(`job ${job.name} is registered twice`);
      registrations.set(job.name, { job, handler: handler as JobHandler<unknown> });
    },

    schedule(job, cron, payload) {
      if (bossStarted) throw new Error(`schedule job ${job.name} before the queue starts`);
      assertPayload(job, payload);
      schedules.set(job.name, { cron, payload });
    },

    works,

    async start({ work = works } = {}) {
      if (bossStarted) throw new Error('the job queue is started already');
      if (work && !works) throw new Error('this job queue was created to enqueue only');
      for (const name of schedules.keys()) {
        if (!registrations.has(name)) throw new Error(`job ${name} is scheduled but has no handler`);
      }
      bossStarted = true;
      await boss.start();
      for (const { job } of registrations.values()) {
        // Both are one idempotent statement; updating at every start applies a changed policy to
        // the jobs written from then on (a job keeps the policy it was written with).
        const settings = queueSettings(job.retry);
        if (await boss.getQueue(job.name)) {
          await boss.updateQueue(job.name, { retryDelayMax: null, ...settings });
        } else {
          await boss.createQueue(job.name, settings);
        }
      }
      for (const stored of await boss.getSchedules()) {
        if (registrations.has(stored.name) && !schedules.has(stored.name)) {
          await boss.unschedule(stored.name, stored.key);
        }
      }
      for (const [name, { cron, payload }] of schedules) {
        await boss.schedule(name, cron, payload as object, { tz: 'UTC' });
      }
      ready = true;
      if (!work) return;
      for (const registration of registrations.values()) {
        await boss.work(
          registration.job.name,
          {
            batchSize: registration.job.batchSize,
            burstWhenBatchFull: registration.job.batchSize > 1,
            includeMetadata: true,
            perJobResults: true,
            pollingIntervalSeconds: options.pollingIntervalSeconds ?? 2,
          },
          async (jobs: JobWithMetadata<unknown>[]) =>
            Promise.all(jobs.map((job) => runAttempt(registration, job))),
        );
      }
    },

    async enqueue(executor, job, payload, enqueueOptions = {}) {
      if (!ready) throw new Error(`cannot enqueue job ${job.name}: the job queue is not started`);
      // pg-boss looks up a queue it does not know on its own connection; on the embedded database
      // that lookup would wait for the caller's open transaction forever. Refuse instead.
      if (registrations.get(job.name)?.job !== job) {
        throw new Error(`cannot enqueue job ${job.name}: it is not registered with the job queue`);
      }
      assertPayload(job, payload);
      return boss.send(job.name, payload as object, {
        db: executorQueueDatabase(executor),
        startAfter: enqueueOptions.startAfter,
        singletonKey: enqueueOptions.singletonKey,
      });
    },

    async stop(timeoutMs = 10_000) {
      if (!bossStarted) return;
      bossStarted = false;
      ready = false;
      // pg-boss waits at least one second; `close` ends its own pool (PostgreSQL) and leaves the
      // shared PGlite instance to its owner.
      await boss.stop({ graceful: true, timeout: Math.max(timeoutMs, 1_000), close: true });
    },

    async getJob(job, id) {
      const [found] = await boss.findJobs(job.name, { id });
      if (!found) return null;
      return {
        id: found.id,
        state: found.state,
        retryCount: found.retryCount,
        retryLimit: found.retryLimit,
        startAfter: found.startAfter,
        output: found.output,
      };
    },
  };
}

/** The name `src/start/server.ts` knows the queue by. */
export type Queue = JobQueue;

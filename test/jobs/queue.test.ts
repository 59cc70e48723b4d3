import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { Type } from 'typebox';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type DatabaseHandle, openDatabase } from '../../src/db/client.ts';
import { migrate } from '../../src/db/migrate.ts';
import type { Db } from '../../src/db/types.ts';
import {
  AUTOMATION_RUN_MARK_DAYS,
  PURGE_AUTOMATION_RUNS_CRON,
  PURGE_IDEMPOTENCY_KEYS_CRON,
  purgeAutomationRuns,
  purgeAutomationRunsJob,
  purgeExpiredIdempotencyKeys,
  purgeIdempotencyKeysJob,
  registerMaintenanceJobs,
} from '../../src/jobs/maintenance.jobs.ts';
import { createJobQueue, defineJob, type JobQueue } from '../../src/jobs/queue.ts';
import {
  createPostgresDatabase,
  createTestDatabase,
  TEST_DATABASES,
  type TestDatabase,
} from '../helpers/databases.ts';
import { type LogLine, memoryLogger, sleep, until, within } from './support.ts';

const echoJob = defineJob('test.echo', Type.Object({ tag: Type.String({ maxLength: 50 }) }));

describe.each(TEST_DATABASES)('the durable job queue on %s', (kind) => {
  let database: TestDatabase;
  let db: Db;
  const startedQueues: JobQueue[] = [];

  beforeAll(async () => {
    database = await createTestDatabase(kind);
    db = database.handle.db;
  });
  afterEach(async () => {
    for (const queue of startedQueues.splice(0)) await queue.stop(1_000);
  });
  afterAll(async () => database?.drop());

  /** A queue over the suite's database, polling fast, with its log lines. */
  async function startQueue(
    register: (queue: JobQueue) => void,
    options: { work?: boolean; handle?: DatabaseHandle } = {},
  ): Promise<{ queue: JobQueue; lines: LogLine[] }> {
    const { logger, lines } = memoryLogger();
    const queue = createJobQueue(options.handle ?? database.handle, { logger, pollingIntervalSeconds: 0.5 });
    register(queue);
    startedQueues.push(queue);
    await queue.start({ work: options.work ?? true });
    return { queue, lines };
  }

  it('runs a job whose transaction committed, and never one whose transaction rolled back', async () => {
    const seen: string[] = [];
    const { queue, lines } = await startQueue((queue) =>
      queue.registerHandler(echoJob, async ({ tag }) => {
        seen.push(tag);
        return { echoed: tag };
      }),
    );
    const rolledBackIds: (string | null)[] = [];
    await expect(
      db.transaction().execute(async (tx) => {
        rolledBackIds.push(await queue.enqueue(tx, echoJob, { tag: 'rolled-back' }));
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    const committedId = await db.transaction().execute(async (tx) => {
      await sql`SELECT 1`.execute(tx);
      return queue.enqueue(tx, echoJob, { tag: 'committed' });
    });

    await until(() => seen.includes('committed'));
    // Several polls later, still only the committed job has run.
    await sleep(1_500);
    expect(seen).toEqual(['committed']);
    const [rolledBackId] = rolledBackIds;
    expect(rolledBackId).toEqual(expect.any(String));
    expect(await queue.getJob(echoJob, rolledBackId as string)).toBeNull();
    expect(await queue.getJob(echoJob, committedId as string)).toMatchObject({
      state: 'completed',
      retryCount: 0,
      output: { echoed: 'committed' },
    });
    expect(lines).toContainEqual(
      expect.objectContaining({
        msg: 'job completed',
        job: 'test.echo',
        jobId: committedId,
        attempt: 1,
        output: { echoed: 'committed' },
      }),
    );
  });

  it('retries a failing job and logs the failure and then the result', async () => {
    const flakyJob = defineJob('test.flaky', Type.Object({ n: Type.Integer() }), {
      retryDelaySeconds: 1,
      retryBackoff: false,
    });
    const attempts: number[] = [];
    const { queue, lines } = await startQueue((queue) =>
      queue.registerHandler(flakyJob, async ({ n }, job) => {
        attempts.push(job.attempt);
        if (job.attempt === 1) throw new Error('first attempt fails');
        return { n };
      }),
    );
    const id = (await queue.enqueue(db, flakyJob, { n: 7 })) as string;
    await until(async () => (await queue.getJob(flakyJob, id))?.state === 'completed', 20_000);

    expect(attempts).toEqual([1, 2]);
    expect(await queue.getJob(flakyJob, id)).toMatchObject({ retryCount: 1, output: { n: 7 } });
    const failure = lines.find((line) => line.msg === 'job failed; it will be retried');
    expect(failure).toMatchObject({ level: 40, job: 'test.flaky', jobId: id, attempt: 1 });
    expect(failure?.err).toMatchObject({ message: 'first attempt fails' });
    expect(lines).toContainEqual(
      expect.objectContaining({ msg: 'job completed', jobId: id, attempt: 2, output: { n: 7 } }),
    );
  });

  it('by default retries five times, the first retry 10 to 20 seconds later', async () => {
    const failingJob = defineJob('test.always-fails', Type.Object({}));
    const { queue } = await startQueue((queue) =>
      queue.registerHandler(failingJob, async () => {
        throw new Error('down');
      }),
    );
    const id = (await queue.enqueue(db, failingJob, {})) as string;
    await until(async () => (await queue.getJob(failingJob, id))?.state === 'retry');

    const job = await queue.getJob(failingJob, id);
    expect(job?.retryLimit).toBe(5);
    const wait = (job?.startAfter.getTime() ?? 0) - Date.now();
    expect(wait).toBeGreaterThan(8_000);
    expect(wait).toBeLessThanOrEqual(600_000);
  });

  it('fails a job for good when no retries are left, keeping the error as its output', async () => {
    const fragileJob = defineJob('test.fragile', Type.Object({}), { retryLimit: 0 });
    const { queue, lines } = await startQueue((queue) =>
      queue.registerHandler(fragileJob, async () => {
        throw new TypeError('cannot go on');
      }),
    );
    const id = (await queue.enqueue(db, fragileJob, {})) as string;
    await until(async () => (await queue.getJob(fragileJob, id))?.state === 'failed');

    expect((await queue.getJob(fragileJob, id))?.output).toEqual({
      name: 'TypeError',
      message: 'cannot go on',
    });
    expect(lines).toContainEqual(
      expect.objectContaining({ level: 50, msg: 'job failed; no retries left', jobId: id, retriesLeft: 0 }),
    );
  });

  it('fails a stored job whose payload no longer fits its schema for good, without running it', async () => {
    const before = defineJob('test.reshaped', Type.Object({ n: Type.Integer() }));
    const { queue: producer } = await startQueue(
      (queue) => queue.registerHandler(before, async () => undefined),
      {
        work: false,
      },
    );
    const id = (await producer.enqueue(db, before, { n: 1 })) as string;
    await producer.stop();

    // A later release changed the payload's shape.
    const after = defineJob('test.reshaped', Type.Object({ n: Type.String() }));
    let ran = false;
    const { queue, lines } = await startQueue((queue) =>
      queue.registerHandler(after, async () => {
        ran = true;
        return undefined;
      }),
    );
    await until(async () => (await queue.getJob(after, id))?.state === 'failed');
    expect(ran).toBe(false);
    expect(await queue.getJob(after, id)).toMatchObject({
      retryCount: 0,
      output: { error: 'invalid_payload' },
    });
    expect(lines).toContainEqual(
      expect.objectContaining({ level: 50, msg: 'job payload invalid; not retried', jobId: id, path: '/n' }),
    );
  });

  it('refuses a job nobody handles, or a payload off its schema, at once, even inside a transaction', async () => {
    const { queue } = await startQueue((queue) => queue.registerHandler(echoJob, async () => undefined));
    const orphanJob = defineJob('test.orphan', Type.Object({}));
    await expect(
      within(
        db.transaction().execute((tx) => queue.enqueue(tx, orphanJob, {})),
        5_000,
        'enqueue of an unregistered job',
      ),
    ).rejects.toThrow('not registered');
    await expect(queue.enqueue(db, echoJob, { tag: 42 } as never)).rejects.toThrow(
      'payload of job test.echo does not match its schema: /tag',
    );
    await expect(queue.enqueue(db, echoJob, { tag: 'x'.repeat(51) })).rejects.toThrow('does not match');
    // The connection is still fine afterwards.
    expect(await queue.enqueue(db, echoJob, { tag: 'fine' })).toEqual(expect.any(String));

    const { logger } = memoryLogger();
    const unstarted = createJobQueue(database.handle, { logger });
    unstarted.registerHandler(echoJob, async () => undefined);
    await expect(unstarted.enqueue(db, echoJob, { tag: 'early' })).rejects.toThrow('not started');
  });

  it('refuses job names that pg-boss could not take safely', () => {
    for (const name of ['', 'Upper.case', 'semi;colon', "quote'd", 'trailing.', `a${'b'.repeat(100)}`]) {
      expect(() => defineJob(name, Type.Object({}))).toThrow('dotted lower-case words');
    }
  });

  it('lets a running job finish when the queue stops', async () => {
    const slowJob = defineJob('test.slow', Type.Object({}));
    let started = false;
    let finished = false;
    const { queue } = await startQueue((queue) =>
      queue.registerHandler(slowJob, async () => {
        started = true;
        await sleep(1_500);
        finished = true;
        return undefined;
      }),
    );
    const id = (await queue.enqueue(db, slowJob, {})) as string;
    await until(() => started);
    await queue.stop(10_000);
    expect(finished).toBe(true);

    const { queue: inspector } = await startQueue(
      (inspector) => inspector.registerHandler(slowJob, async () => undefined),
      { work: false },
    );
    expect((await inspector.getJob(slowJob, id))?.state).toBe('completed');
  });

  it('purges expired idempotency keys, and only those, in its hourly job', async () => {
    const account = randomUUID();
    await db.insertInto('accounts').values({ id: account, name: 'Purge', modules: [] }).execute();
    // More expired keys than one DELETE takes, so that the batches are exercised too.
    await sql`
      INSERT INTO idempotency_keys (account_id, scope, key, request_hash, state, lease_until, expires_at)
      SELECT ${account}, 'records', 'old-' || n, 'h', 'done', now(), now() - interval '1 minute'
      FROM generate_series(1, 5003) AS n
    `.execute(db);
    await db
      .insertInto('idempotency_keys')
      .values(
        ['fresh-1', 'fresh-2'].map((key) => ({
          account_id: account,
          scope: 'records',
          key,
          request_hash: 'h',
          state: 'done',
          lease_until: new Date(),
          expires_at: new Date(Date.now() + 60_000),
        })),
      )
      .execute();

    const { queue, lines } = await startQueue((queue) => registerMaintenanceJobs(queue, db));
    const schedules = await sql<{ name: string; cron: string; timezone: string }>`
      SELECT name, cron, timezone FROM pgboss.schedule WHERE name = ${purgeIdempotencyKeysJob.name}
    `.execute(db);
    expect(schedules.rows).toEqual([
      { name: 'maintenance.purge-idempotency-keys', cron: PURGE_IDEMPOTENCY_KEYS_CRON, timezone: 'UTC' },
    ]);

    // The schedule fires once an hour; the same job, enqueued now, shows what it does.
    const id = await queue.enqueue(db, purgeIdempotencyKeysJob, {});
    await until(() => lines.some((line) => line.msg === 'job completed' && line.jobId === id), 20_000);
    expect(lines).toContainEqual(expect.objectContaining({ jobId: id, output: { deleted: 5003 } }));
    const left = await db
      .selectFrom('idempotency_keys')
      .select('key')
      .where('account_id', '=', account)
      .execute();
    expect(left.map((row) => row.key).sort()).toEqual(['fresh-1', 'fresh-2']);
    expect(await purgeExpiredIdempotencyKeys(db)).toBe(0);
  });

  it('purges automation run marks past their days, and only those, in its hourly job', async () => {
    const account = randomUUID();
    await db.insertInto('accounts').values({ id: account, name: 'Runs', modules: [] }).execute();
    const mark = (days: number) => ({
      account_id: account,
      id: randomUUID(),
      automation_id: randomUUID(),
      record_id: randomUUID(),
      created_at: new Date(Date.now() - days * 86_400_000),
    });
    const kept = [mark(AUTOMATION_RUN_MARK_DAYS - 1), mark(0)];
    await db
      .insertInto('automation_runs')
      .values([mark(AUTOMATION_RUN_MARK_DAYS + 1), mark(AUTOMATION_RUN_MARK_DAYS + 40), ...kept])
      .execute();
    const { queue, lines } = await startQueue((queue) => registerMaintenanceJobs(queue, db));
    const schedules = await sql<{ cron: string }>`
      SELECT cron FROM pgboss.schedule WHERE name = ${purgeAutomationRunsJob.name}
    `.execute(db);
    expect(schedules.rows).toEqual([{ cron: PURGE_AUTOMATION_RUNS_CRON }]);
    const id = await queue.enqueue(db, purgeAutomationRunsJob, {});
    await until(() => lines.some((line) => line.msg === 'job completed' && line.jobId === id), 20_000);
    expect(lines).toContainEqual(expect.objectContaining({ jobId: id, output: { deleted: 2 } }));
    const left = await db
      .selectFrom('automation_runs')
      .select('id')
      .where('account_id', '=', account)
      .execute();
    expect(left.map((row) => row.id).sort()).toEqual(kept.map((row) => row.id).sort());
    expect(await purgeAutomationRuns(db)).toBe(0);
  });

  it('keeps jobs across a restart of the database and runs each exactly once', async () => {
    const survivorJob = defineJob('test.survivor', Type.Object({ n: Type.Integer() }));
    let reopen: () => Promise<DatabaseHandle>;
    if (kind === 'pglite') {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'leads-jobs-'));
      onTestFinished(() => rm(dir, { recursive: true, force: true }));
      reopen = () => openDatabase({ databaseUrl: undefined, dataDir: dir, poolSize: 1 });
    } else {
      const created = await createPostgresDatabase();
      onTestFinished(created.drop);
      reopen = () => openDatabase({ databaseUrl: created.url, dataDir: '', poolSize: 4 });
    }

    const first = await reopen();
    await migrate(first.db);
    const producer = createJobQueue(first, { logger: memoryLogger().logger });
    producer.registerHandler(survivorJob, async () => undefined);
    await producer.start({ work: false });
    for (const n of [1, 2, 3]) await producer.enqueue(first.db, survivorJob, { n });
    await producer.stop();
    await first.close();

    const second = await reopen();
    onTestFinished(() => second.close());
    const runs: number[] = [];
    await startQueue(
      (consumer) =>
        consumer.registerHandler(survivorJob, async ({ n }) => {
          runs.push(n);
          return undefined;
        }),
      { handle: second },
    );
    await until(() => runs.length >= 3);
    await sleep(1_500);
    expect(runs.sort()).toEqual([1, 2, 3]);
    // Stop the consumer before its database closes.
    for (const queue of startedQueues.splice(0)) await queue.stop(1_000);
  }, 60_000);
});

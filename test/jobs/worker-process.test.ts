import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { type DatabaseHandle, openDatabase } from '../../src/db/client.ts';
import { migrate } from '../../src/db/migrate.ts';
import { purgeIdempotencyKeysJob, registerMaintenanceJobs } from '../../src/jobs/maintenance.jobs.ts';
import { createJobQueue } from '../../src/jobs/queue.ts';
import { createPostgresDatabase, TEST_DATABASES } from '../helpers/databases.ts';
import { callApi, startServerProcess, startWorkerProcess } from '../helpers/server-process.ts';
import { memoryLogger, until, within } from './support.ts';

describe.each(TEST_DATABASES)('`leads worker` on %s', (kind) => {
  it('runs a job that was waiting for it, and stops cleanly on SIGTERM', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'leads-worker-'));
    onTestFinished(() => rm(dataDir, { recursive: true, force: true }));
    const env: Record<string, string> = { LEADS_DATA_DIR: dataDir };
    let open: () => Promise<DatabaseHandle>;
    if (kind === 'pglite') {
      open = () => openDatabase({ databaseUrl: undefined, dataDir, poolSize: 1 });
    } else {
      const created = await createPostgresDatabase();
      onTestFinished(created.drop);
      env.DATABASE_URL = created.url;
      open = () => openDatabase({ databaseUrl: created.url, dataDir: '', poolSize: 2 });
    }

    // Before any worker runs: an expired and a fresh idempotency key, and a purge job waiting.
    const account = randomUUID();
    const before = await open();
    try {
      await migrate(before.db);
      await before.db.insertInto('accounts').values({ id: account, name: 'Worker', modules: [] }).execute();
      await before.db
        .insertInto('idempotency_keys')
        .values(
          [
            { key: 'expired', expires_at: new Date(Date.now() - 60_000) },
            { key: 'fresh', expires_at: new Date(Date.now() + 3_600_000) },
          ].map((row) => ({
            ...row,
            account_id: account,
            scope: 'records',
            request_hash: 'h',
            state: 'done',
            lease_until: new Date(),
          })),
        )
        .execute();
      const producer = createJobQueue(before, { logger: memoryLogger().logger });
      registerMaintenanceJobs(producer, before.db);
      await producer.start({ work: false });
      await producer.enqueue(before.db, purgeIdempotencyKeysJob, {});
      await producer.stop();
    } finally {
      await before.close();
    }

    const worker = startWorkerProcess(env);
    const { child, exited } = worker;
    onTestFinished(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    const completed = () =>
      worker
        .logLines()
        .find((line) => line.msg === 'job completed' && line.job === purgeIdempotencyKeysJob.name);
    await until(() => completed() !== undefined || child.exitCode !== null, 60_000).catch(() => {});
    expect(completed(), worker.output()).toMatchObject({ output: { deleted: 1 } });

    child.kill('SIGTERM');
    expect(await within(exited, 20_000, 'the worker after SIGTERM')).toEqual({ code: 0, signal: null });
    expect(worker.output()).toContain('worker stopped');

    // The embedded database's lock is released: it opens again, with only the fresh key left.
    const after = await open();
    try {
      const keys = await after.db.selectFrom('idempotency_keys').select('key').execute();
      expect(keys.map((row) => row.key)).toEqual(['fresh']);
    } finally {
      await after.close();
    }
  }, 120_000);
});

describe('`leads worker` as the first process on a new database', () => {
  it('shows the operator token it generated, which then opens /admin/v1 of the server', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'leads-worker-first-'));
    onTestFinished(() => rm(dataDir, { recursive: true, force: true }));
    const env = { LEADS_DATA_DIR: dataDir, LEADS_ADMIN_TOKEN: '' };
    const worker = startWorkerProcess(env);
    onTestFinished(() => {
      if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill('SIGKILL');
    });
    const started = () => worker.logLines().some((line) => line.msg === 'worker started');
    await until(() => started() || worker.child.exitCode !== null, 60_000).catch(() => {});
    expect(started(), worker.output()).toBe(true);
    const token = /Operator token \(\/admin\/v1\): (adm_\S+)/.exec(worker.output())?.[1];
    expect(token, worker.output()).toBeDefined();
    worker.child.kill('SIGTERM');
    expect(await within(worker.exited, 20_000, 'the worker after SIGTERM')).toEqual({
      code: 0,
      signal: null,
    });

    const server = await startServerProcess(env);
    onTestFinished(() => server.kill('SIGKILL'));
    expect(server.output()).not.toContain('Operator token');
    expect((await callApi(`${server.url}/admin/v1/accounts`, token!)).status).toBe(200);
    expect((await callApi(`${server.url}/admin/v1/accounts`, 'adm_wrong')).status).toBe(401);
    server.kill('SIGTERM');
    expect(await within(server.exited, 20_000, 'the server after SIGTERM')).toEqual({
      code: 0,
      signal: null,
    });
  }, 120_000);
});

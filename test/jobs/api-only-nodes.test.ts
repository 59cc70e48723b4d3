import { describe, expect, it, onTestFinished } from 'vitest';
import { recomputeDuplicateKeysJob } from '../../src/modules/entities/entities.jobs.ts';
import { createPostgresDatabase, TEST_DATABASES } from '../helpers/databases.ts';
import { LEAD_ENTITY } from '../helpers/fixtures.ts';
import { callApi, startServerProcess, startWorkerProcess } from '../helpers/server-process.ts';
import { sleep, until, within } from './support.ts';

const ADMIN_TOKEN = 'adm_api_only_nodes_token_0123456789';

describe.runIf(TEST_DATABASES.includes('postgres'))('an API-only node on PostgreSQL', () => {
  it('enqueues the work a request causes, and a separate `leads worker` performs it', async () => {
    const database = await createPostgresDatabase();
    onTestFinished(database.drop);
    const env = { DATABASE_URL: database.url, LEADS_ADMIN_TOKEN: ADMIN_TOKEN };
    const api = await startServerProcess({ ...env, LEADS_RUN_WORKERS: 'false' });
    onTestFinished(async () => {
      api.kill('SIGTERM');
      await api.exited;
    });

    const account = await callApi(`${api.url}/admin/v1/accounts`, ADMIN_TOKEN, 'POST', { name: 'Nodes' });
    const key = account.body.api_key.key as string;
    const entityUrl = `${api.url}/api/v1/settings/entities/lead`;
    const emailRule = { ...LEAD_ENTITY, duplicate_rule: { match: ['email'], action: 'update' } };
    expect((await callApi(entityUrl, key, 'PUT', emailRule)).status).toBe(200);
    const first = await callApi(`${api.url}/api/v1/records`, key, 'POST', {
      entity: 'lead',
      fields: { email: 'one@nodes.test', phone: '+49 30 7777' },
    });
    expect(first.status).toBe(201);

    const phoneRule = { ...LEAD_ENTITY, duplicate_rule: { match: ['phone'], action: 'update' } };
    const changed = await callApi(entityUrl, key, 'PUT', phoneRule);
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    expect(changed.body.duplicate_keys).toEqual({ status: 'recomputing', done: 0, total: 1 });

    // The API node works no jobs: past the job's start time and a poll, nothing has run.
    await sleep(6_000);
    expect((await callApi(entityUrl, key)).body.duplicate_keys.status).toBe('recomputing');

    const worker = startWorkerProcess(env);
    onTestFinished(async () => {
      if (worker.child.exitCode === null) worker.child.kill('SIGKILL');
      await worker.exited;
    });
    await until(async () => (await callApi(entityUrl, key)).body.duplicate_keys.status === 'current', 60_000);
    expect((await callApi(entityUrl, key)).body.duplicate_keys).toEqual({
      status: 'current',
      done: 1,
      total: 1,
    });
    expect(
      worker
        .logLines()
        .find((line) => line.msg === 'job completed' && line.job === recomputeDuplicateKeysJob.name),
      worker.output(),
    ).toMatchObject({ output: { rekeyed: 1, superseded: false } });

    // The stored record now answers to the new rule.
    const samePhone = await callApi(`${api.url}/api/v1/records`, key, 'POST', {
      entity: 'lead',
      fields: { email: 'two@nodes.test', phone: '+49 30 7777' },
    });
    expect(samePhone.status).toBe(200);
    expect(samePhone.body.id).toBe(first.body.id);

    worker.child.kill('SIGTERM');
    expect(await within(worker.exited, 20_000, 'the worker after SIGTERM')).toEqual({
      code: 0,
      signal: null,
    });
    api.kill('SIGTERM');
    expect((await within(api.exited, 20_000, 'the API node after SIGTERM')).code).toBe(0);
  }, 150_000);
});

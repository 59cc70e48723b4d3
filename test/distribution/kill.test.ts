import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/client.ts';
import { createOutboundService } from '../../src/outbound/outbound.service.ts';
import { createPostgresDatabase, TEST_DATABASES } from '../helpers/databases.ts';
import { distributionFactory } from '../helpers/distribution-factory.ts';
import { LEAD_ENTITY } from '../helpers/fixtures.ts';
import {
  callApi,
  migratedDataDir,
  type ServerProcess,
  startServerProcess,
} from '../helpers/server-process.ts';
import { startReceiver, waitFor } from '../outbound/receiver.ts';

const ADMIN_TOKEN = 'adm_distribution_kill_test_token_00';
const SECRET = 'distribution-kill-test-instance-secret-0123456789';

describe.each(TEST_DATABASES)('a delivery across kill -9 of its sender on %s', (kind) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  });

  it('is sent again with the same webhook-id after the restart, and stays one delivery', async () => {
    const receiver = await startReceiver();
    cleanups.push(receiver.close);
    const env: Record<string, string> = {
      LEADS_ADMIN_TOKEN: ADMIN_TOKEN,
      LEADS_SECRET: SECRET,
      LEADS_FETCH_ALLOW_PRIVATE: 'true',
      LEADS_RETRY_SCHEDULE: '0.1,0.1',
      // A sender that died gives its message up after 5 s.
      LEADS_OUTBOUND_LEASE_S: '5',
    };
    const dataDir =
      kind === 'pglite'
        ? await migratedDataDir('leads-distribution-kill-')
        : await mkdtemp(path.join(os.tmpdir(), 'leads-distribution-kill-'));
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    if (kind === 'postgres') {
      const database = await createPostgresDatabase();
      cleanups.push(database.drop);
      env.DATABASE_URL = database.url;
    } else {
      env.LEADS_DATA_DIR = dataDir;
    }
    let server: ServerProcess = await startServerProcess(env);
    cleanups.push(async () => server.kill('SIGKILL'));
    const account = await callApi(`${server.url}/admin/v1/accounts`, ADMIN_TOKEN, 'POST', {
      name: 'Kill',
      modules: ['distribution'],
    });
    const key: string = account.body.api_key.key;
    expect(
      (await callApi(`${server.url}/api/v1/settings/entities/lead`, key, 'PUT', LEAD_ENTITY)).status,
    ).toBe(200);
    const record = await callApi(`${server.url}/api/v1/records`, key, 'POST', {
      entity: 'lead',
      fields: { email: 'killed@distribution.test' },
    });
    // The setup is written while the service is stopped (the embedded database has one user).
    server.kill('SIGTERM');
    await server.exited;
    const database = await openDatabase({ databaseUrl: env.DATABASE_URL, dataDir, poolSize: 2 });
    const outbound = createOutboundService(database.db, { secret: SECRET, allowPrivate: true });
    const factory = distributionFactory({ db: database.db, services: { outbound } }, { id: account.body.id });
    const distributionId = await factory.distribution('lead');
    const partnerId = await factory.partner({ name: 'Slow' });
    const participation = await factory.participation(distributionId, { partnerId, address: receiver.url });
    await factory.rule(distributionId, { participationIds: [participation.id] });
    outbound.close();
    await database.close();
    receiver.verifyWith(participation.secret!);

    server = await startServerProcess(env);
    // The receiver takes the first request and never answers: the sender dies while it waits.
    receiver.answerNext('hang');
    const start = callApi(`${server.url}/api/v1/distribution/distributions`, key, 'POST', {
      record_id: record.body.id,
    }).catch(() => null);
    await waitFor(() => receiver.received.length >= 1, 10_000, 'the first send');
    server.kill('SIGKILL');
    await server.exited;
    expect(await start).toBeNull();

    server = await startServerProcess(env);
    await waitFor(() => receiver.received.length >= 2, 30_000, 'the send after the restart');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(receiver.invalid).toEqual([]);
    expect(receiver.received).toHaveLength(2);
    const [first, second] = receiver.received;
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(second!.json.data.delivery_id).toBe(first!.json.data.delivery_id);
    const list = await waitFor(async () => {
      const found = await callApi(`${server.url}/api/v1/distribution/deliveries`, key);
      return found.body.deliveries[0]?.status === 'delivered' && found.body.deliveries;
    });
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ id: first!.json.data.delivery_id, attempts: 2, status: 'delivered' });
    server.kill('SIGTERM');
    await server.exited;
  }, 120_000);
});

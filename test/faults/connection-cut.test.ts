import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { POSTGRES_ADMIN_URL, TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

/** Cuts every connection the service holds to its database, as a failover or an operator would. */
async function terminateConnections(databaseUrl: string): Promise<number> {
  const database = new URL(databaseUrl).pathname.slice(1);
  const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  await admin.connect();
  try {
    const result = await admin.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [database],
    );
    return result.rowCount ?? 0;
  } finally {
    await admin.end();
  }
}

describe.runIf(TEST_DATABASES.includes('postgres'))('PostgreSQL connections cut mid-load', () => {
  let t: TestApp;
  let account: TestAccount;

  beforeAll(async () => {
    t = await startTestApp('postgres');
    account = await accountWithLeads(t);
  });
  afterAll(async () => t?.close());

  it('answers 503 service_unavailable to requests in flight, never crashes or hangs, and serves again without a restart', async () => {
    let sent = 0;
    let cutting = true;
    const statuses = new Map<number, number>();
    const bodies = new Set<string>();
    // Requests keep coming until the last cut, so that some are always in flight when one lands:
    // grouped creations, and (every other one) keyed creations, which take a path of their own.
    const stream = async (worker: number) => {
      for (let i = 0; cutting || i < 40; i++) {
        const response = await t.request({
          method: 'POST',
          url: '/api/v1/records',
          key: account.apiKey,
          headers: i % 2 === 0 ? { 'idempotency-key': `cut-${worker}-${i}` } : {},
          body: { entity: 'lead', fields: { email: `cut-${worker}-${i}@b.co` } },
        });
        sent += 1;
        statuses.set(response.statusCode, (statuses.get(response.statusCode) ?? 0) + 1);
        if (response.statusCode >= 500) bodies.add(response.body);
      }
    };
    const load = Promise.all([0, 1, 2, 3, 4].map(stream));
    let cuts = 0;
    // Six cuts at least; on a fast host a cut can land between queries only, so more (at most 60)
    // until one has caught a request in flight.
    for (let round = 0; round < 6 || (round < 60 && !statuses.has(503)); round++) {
      await new Promise((resolve) => setTimeout(resolve, 40));
      cuts += await terminateConnections(t.database.url!);
    }
    cutting = false;
    await load;
    expect(cuts).toBeGreaterThan(0);
    // Some requests were in flight when their connection was cut, and were told so.
    expect(statuses.get(503) ?? 0).toBeGreaterThan(0);
    expect(sent).toBeGreaterThanOrEqual(200);
    // Only successes and 503s: no 500, no hang (every stream finished, every request answered).
    for (const status of statuses.keys()) expect([201, 503]).toContain(status);
    expect([...statuses.values()].reduce((sum, n) => sum + n, 0)).toBe(sent);
    for (const body of bodies) expect(JSON.parse(body)).toEqual({ error: 'service_unavailable' });

    // Serves again within seconds, on the same app instance.
    const deadline = Date.now() + 5_000;
    let recovered = false;
    while (!recovered && Date.now() < deadline) {
      const response = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: { entity: 'lead', fields: { email: `after-cut-${Date.now()}@b.co` } },
      });
      recovered = response.statusCode === 201;
      if (!recovered) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(recovered).toBe(true);
  });
});

import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createDispatcher, type Dispatcher } from '../../src/outbound/dispatcher.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { type Receiver, startReceiver, waitFor } from './receiver.ts';

const silent = { info() {}, warn() {}, error() {} };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The most requests a receiver got within `spanMs` of each other: with every request hanging up
 * to the 3 s timeout, those within 2.5 s were in flight at once.
 */
function mostAtOnce(received: Receiver['received'], spanMs = 2_500): number {
  const times = received.map((entry) => entry.at).sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i]! - times[j]! >= spanMs) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

/**
 * Sending slots are shared (docs/decisions.md, Outbound messages, "Shares of the sending"): an
 * endpoint that never answers holds at most a few of them, so that other endpoints' messages go
 * out at once.
 * The webhook timeout is 3 s here (15 s in production): before the rule, a message behind 48
 * hanging ones waited for three rounds of 16 timeouts (about 9 s).
 */
describe.each(TEST_DATABASES)('outbound sending slots under a never-answering endpoint on %s', (kind) => {
  let t: TestApp;
  let dispatchers: Dispatcher[] = [];
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    t = await startTestApp(kind, {
      outbound: { webhookTimeoutMs: 3_000, leaseMs: 30_000, retryScheduleMs: [60] },
    });
  });
  afterEach(async () => {
    for (const dispatcher of dispatchers) await dispatcher.stop(100);
    dispatchers = [];
    for (const receiver of receivers.splice(0)) await receiver.close();
    // What the stopped dispatchers left pending must not be sent by the next test's.
    await t.db
      .updateTable('outbound_messages')
      .set({ status: 'failed', claim_id: null, claimed_until: null })
      .where('status', '=', 'pending')
      .execute();
  });
  afterAll(async () => {
    await t?.close();
  });

  function startDispatcher() {
    // No CPU gauges: claims follow the fixed pace whatever else runs on the machine.
    const dispatcher = createDispatcher(t.services.outbound, silent, {
      idlePollMs: 20,
      cpuPressure: null,
      eventLoop: null,
    });
    dispatcher.start();
    dispatchers.push(dispatcher);
    return dispatcher;
  }

  async function receiver(answer?: 'hang') {
    const started = await startReceiver();
    if (answer) started.answerAlways(answer);
    receivers.push(started);
    return started;
  }

  async function subscribe(account: TestAccount, hook: Receiver, events: string[]) {
    const response = await t.request({
      method: 'POST',
      url: '/api/v1/settings/webhooks',
      key: account.apiKey,
      body: { url: hook.url, events },
    });
    expect(response.statusCode).toBe(201);
    return response.json() as { id: string; secret: string };
  }

  const intake = (account: TestAccount, email: string) =>
    t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: account.apiKey,
      body: { entity: 'lead', fields: { email } },
    });

  async function notes(account: TestAccount, record: string, count: number) {
    for (let i = 0; i < count; i++) {
      const response = await t.request({
        method: 'POST',
        url: '/api/v1/notes',
        key: account.apiKey,
        body: { record, body: `note ${i}` },
      });
      expect(response.statusCode).toBe(201);
    }
  }

  async function bulk(account: TestAccount, prefix: string, count: number) {
    for (let start = 0; start < count; start += 100) {
      const records = Array.from({ length: Math.min(100, count - start) }, (_, i) => ({
        entity: 'lead',
        fields: { email: `${prefix}-${start + i}@fair.test` },
      }));
      const response = await t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key: account.apiKey,
        body: { records },
      });
      expect(response.statusCode).toBe(200);
    }
  }

  /** A healthy endpoint of a new account, one record taken in: how long its message took. */
  async function healthyLag() {
    const other = await accountWithLeads(t);
    const healthy = await receiver();
    healthy.verifyWith((await subscribe(other, healthy, ['record.created'])).secret);
    const sentAt = Date.now();
    expect((await intake(other, 'healthy@fair.test')).statusCode).toBe(201);
    const [entry] = await waitFor(
      () => (healthy.received.length > 0 ? healthy.received : null),
      15_000,
      "the healthy endpoint's message",
    );
    return entry!.at - sentAt;
  }

  async function pendingOf(account: TestAccount) {
    const row = await t.db
      .selectFrom('outbound_messages')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .where('account_id', '=', account.id)
      .where('status', '=', 'pending')
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  it("sends another account's message at once while 48 notes wait for an endpoint that never answers", async () => {
    startDispatcher();
    const slow = await receiver('hang');
    const account = await accountWithLeads(t);
    slow.verifyWith((await subscribe(account, slow, ['note.added'])).secret);
    const record = (await intake(account, 'noted@fair.test')).json().id as string;
    await notes(account, record, 48);
    await waitFor(() => slow.received.length >= 1, 5_000, 'the first hanging request');
    await sleep(1_000);

    const lag = await healthyLag();
    expect(lag).toBeLessThan(1_500);
    // At most four attempts at the hanging endpoint at once; the others wait, still pending.
    expect(slow.received.length).toBeGreaterThan(0);
    expect(mostAtOnce(slow.received)).toBeLessThanOrEqual(4);
    expect(await pendingOf(account)).toBe(48);
  }, 30_000);

  it('holds one account to eight attempts at once across its endpoints and two senders', async () => {
    startDispatcher();
    startDispatcher();
    const account = await accountWithLeads(t);
    const slow: Receiver[] = [];
    for (let i = 0; i < 3; i++) {
      const hook = await receiver('hang');
      hook.verifyWith((await subscribe(account, hook, ['record.created'])).secret);
      slow.push(hook);
    }
    await bulk(account, 'three-endpoints', 30);
    await waitFor(() => slow.some((hook) => hook.received.length > 0), 5_000, 'the first hanging request');
    await sleep(1_000);

    const lag = await healthyLag();
    expect(lag).toBeLessThan(1_500);
    for (const hook of slow) expect(mostAtOnce(hook.received)).toBeLessThanOrEqual(4);
    const all = slow.flatMap((hook) => hook.received);
    expect(all.length).toBeGreaterThan(0);
    expect(mostAtOnce(all)).toBeLessThanOrEqual(8);
    expect(await pendingOf(account)).toBe(90);
  }, 30_000);

  it('gives a quick endpoint eight places, and four again once it hangs', async () => {
    startDispatcher();
    const hook = await receiver();
    const account = await accountWithLeads(t);
    hook.verifyWith((await subscribe(account, hook, ['record.created'])).secret);
    await bulk(account, 'quick', 20);
    await waitFor(() => hook.received.length >= 20, 5_000, 'the quick answers');

    hook.answerAlways('hang');
    const hangingFrom = hook.received.length;
    await bulk(account, 'hung', 60);
    await waitFor(() => hook.received.length > hangingFrom, 5_000, 'the first hanging request');
    await sleep(1_000);
    const hanging = hook.received.slice(hangingFrom);
    // Proven by its quick answers: more than four at once, never more than eight.
    expect(mostAtOnce(hanging)).toBeGreaterThan(4);
    expect(mostAtOnce(hanging)).toBeLessThanOrEqual(8);
    expect(await healthyLag()).toBeLessThan(1_500);

    // Its attempts timed out (3 s): from then on four at once.
    const firstAt = hanging[0]!.at;
    await waitFor(
      () => hook.received.some((entry) => entry.at > firstAt + 2_500),
      10_000,
      'the requests after the timeouts',
    );
    await sleep(1_000);
    const after = hook.received.filter((entry) => entry.at > firstAt + 2_500);
    expect(mostAtOnce(after)).toBeLessThanOrEqual(4);
  }, 30_000);

  it("moves a hanging endpoint's backlog out of the way, larger than one claim looks at", async () => {
    startDispatcher();
    const slow = await receiver('hang');
    const account = await accountWithLeads(t);
    slow.verifyWith((await subscribe(account, slow, ['record.created'])).secret);
    await bulk(account, 'backlog', 400);
    await waitFor(() => slow.received.length >= 1, 5_000, 'the first hanging request');
    // Once its attempts ran longer than a second, its waiting messages are postponed.
    await sleep(1_500);

    const lag = await healthyLag();
    expect(lag).toBeLessThan(1_500);
    expect(mostAtOnce(slow.received)).toBeLessThanOrEqual(4);
    const postponed = await sql<{ count: string }>`
      SELECT count(*) AS count FROM outbound_messages
      WHERE account_id = ${account.id}::uuid AND status = 'pending' AND next_attempt_at > now()`.execute(
      t.db,
    );
    expect(Number(postponed.rows[0]!.count)).toBeGreaterThan(300);
  }, 30_000);
});

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createDispatcher, type Dispatcher } from '../../src/outbound/dispatcher.ts';
import { createStallGuard } from '../../src/outbound/stall-guard.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { type Received, type Receiver, startReceiver, waitFor } from './receiver.ts';
import { type ReceiverProcess, startReceiverProcess } from './receiver-process.ts';

const silent = { info() {}, warn() {}, error() {} };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The webhook timeout here (15 s in production). */
const TIMEOUT_MS = 1_000;
const RETRY_SCHEDULE_MS = [500, 1_000, 2_000, 4_000];

/**
 * The most requests in flight at once among `requests`: each from its arrival until its sender
 * gave up (`closedAt`; one still open is open from its arrival on).
 */
function mostAtOnce(requests: Received[]): number {
  const edges = requests.flatMap((entry) => [
    { at: entry.at, step: 1 },
    { at: entry.closedAt ?? Number.POSITIVE_INFINITY, step: -1 },
  ]);
  // A request that closed as another arrived did not overlap it.
  edges.sort((a, b) => a.at - b.at || a.step - b.step);
  let open = 0;
  let most = 0;
  for (const edge of edges) {
    open += edge.step;
    most = Math.max(most, open);
  }
  return most;
}

describe('the stall guard', () => {
  it('lets everything out until an attempt times out, then one probe at a time', () => {
    const guard = createStallGuard();
    const first = guard.admit('a');
    const second = guard.admit('a');
    expect([first.kind, second.kind]).toEqual(['send', 'send']);
    guard.settle('a', first, true);
    const probe = guard.admit('a');
    expect(probe.kind).toBe('probe');
    expect(guard.admit('a').kind).toBe('refuse');
    expect(guard.admit('b').kind).toBe('send');
    // An attempt let out before the stall that also times out does not free the probe's place.
    guard.settle('a', second, true);
    expect(guard.admit('a').kind).toBe('refuse');
    guard.settle('a', probe, true);
    expect(guard.admit('a').kind).toBe('probe');
  });

  it('ends a stall on any answer, lets a test message out whatever the state, and weighs outcomes in the order attempts went out', () => {
    const guard = createStallGuard();
    guard.settle('a', guard.admit('a'), true);
    const probe = guard.admit('a');
    expect(guard.admit('a', true).kind).toBe('send');
    guard.settle('a', guard.admit('a', true), false);
    expect(guard.admit('a').kind).toBe('send');
    // The old probe, let out before the answered test, times out: old news.
    const after = guard.admit('a');
    guard.settle('a', probe, true);
    expect(guard.admit('a').kind).toBe('send');
    // An attempt let out after the answer that times out stalls it again.
    guard.settle('a', after, true);
    expect(guard.admit('a').kind).toBe('probe');
  });

  it('forgets the oldest stalled endpoint beyond its bound', () => {
    const guard = createStallGuard(2);
    for (const key of ['a', 'b', 'c']) guard.settle(key, guard.admit(key), true);
    expect(guard.admit('a').kind).toBe('send');
    expect(guard.admit('b').kind).toBe('probe');
    expect(guard.admit('c').kind).toBe('probe');
  });
});

/**
 * A receiver that never answers holds a sending place per attempt until the timeout: without the
 * guard, 100 messages to it kept all 16 places for seven timeouts in a row and every other
 * account's messages waited behind them (docs/decisions.md, Outbound messages, "A stalled
 * endpoint holds one sending place").
 */
describe.each(TEST_DATABASES)('outbound sending beside an endpoint that stopped answering on %s', (kind) => {
  let t: TestApp;
  let dispatcher: Dispatcher | null = null;
  const receivers: (Receiver | ReceiverProcess)[] = [];
  beforeAll(async () => {
    t = await startTestApp(kind, {
      outbound: {
        webhookTimeoutMs: TIMEOUT_MS,
        leaseMs: 30_000,
        retryScheduleMs: RETRY_SCHEDULE_MS,
      },
    });
  });
  afterEach(async () => {
    await dispatcher?.stop(100);
    dispatcher = null;
    for (const receiver of receivers.splice(0)) await receiver.close();
    // What the stopped dispatcher left pending must not be sent by the next test's.
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
    // No CPU gauges: claims are not held back by whatever else runs on the machine.
    dispatcher = createDispatcher(t.services.outbound, silent, {
      idlePollMs: 20,
      cpuPressure: null,
      eventLoop: null,
    });
    dispatcher.start();
  }

  async function receiver(answer?: 'hang') {
    const started = await startReceiver();
    if (answer) started.answerAlways(answer);
    receivers.push(started);
    return started;
  }

  /** A receiver as `receiver`'s, in a process of its own (receiver-process.ts). */
  async function receiverProcess(answer?: 'hang') {
    const started = await startReceiverProcess();
    receivers.push(started);
    if (answer) await started.answerAlways(answer);
    return started;
  }

  async function subscribe(
    account: TestAccount,
    hook: Pick<Receiver | ReceiverProcess, 'url' | 'verifyWith'>,
  ) {
    const response = await t.request({
      method: 'POST',
      url: '/api/v1/settings/webhooks',
      key: account.apiKey,
      body: { url: hook.url, events: ['record.created'] },
    });
    expect(response.statusCode).toBe(201);
    const created = response.json() as { id: string; secret: string };
    await hook.verifyWith(created.secret);
    return created.id;
  }

  async function bulk(account: TestAccount, prefix: string, count: number) {
    const records = Array.from({ length: count }, (_, i) => ({
      entity: 'lead',
      fields: { email: `${prefix}-${i}@stall.test` },
    }));
    const response = await t.request({
      method: 'POST',
      url: '/api/v1/records/bulk',
      key: account.apiKey,
      body: { records },
    });
    expect(response.statusCode).toBe(200);
  }

  async function attemptsOf(account: TestAccount, webhookId: string) {
    const response = await t.request({
      method: 'GET',
      url: `/api/v1/settings/webhooks/${webhookId}/attempts?limit=100`,
      key: account.apiKey,
    });
    expect(response.statusCode).toBe(200);
    return (response.json() as { attempts: { outcome: string; error: string | null; duration_ms: number }[] })
      .attempts;
  }

  async function messagesOf(account: TestAccount) {
    return t.db
      .selectFrom('outbound_messages')
      .select(['status', 'attempts'])
      .where('account_id', '=', account.id)
      .execute();
  }

  /**
   * An account whose one webhook (`hook`, told to leave requests unanswered) never answers,
   * `count` records taken in by one bulk call, and the first attempts' timeout waited out: from
   * then on the endpoint is stalled.
   */
  async function stalledEndpoint<Hook extends Receiver | ReceiverProcess>(
    prefix: string,
    count: number,
    hook: Hook,
  ) {
    startDispatcher();
    const account = await accountWithLeads(t);
    const webhookId = await subscribe(account, hook);
    await bulk(account, prefix, count);
    const received = async () => (Array.isArray(hook.received) ? hook.received : await hook.received());
    await waitFor(async () => (await received()).length > 0, 5_000, 'the first request');
    await sleep(TIMEOUT_MS + 300);
    return { hook, account, webhookId };
  }

  it("keeps it to one request at a time once it timed out, and another account's message goes out at once", async () => {
    // Both receivers run in processes of their own, so that the times they note are the
    // requests' (receiver-process.ts).
    const silentHook = await receiverProcess('hang');
    const { account, webhookId } = await stalledEndpoint('silent', 100, silentHook);

    const other = await accountWithLeads(t);
    const healthy = await receiverProcess();
    await subscribe(other, healthy);
    const created = await t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: other.apiKey,
      body: { entity: 'lead', fields: { email: 'healthy@stall.test' } },
    });
    expect(created.statusCode).toBe(201);
    const takenAt = Date.now();
    const [arrived] = await waitFor(
      async () => {
        const received = await healthy.received();
        return received.length > 0 ? received : null;
      },
      10_000,
      "the other account's message",
    );
    // Without the guard it waits for more rounds of 16 timeouts (5.3 s, the guard taken out).
    expect(arrived!.at - takenAt).toBeLessThan(TIMEOUT_MS);

    await sleep(2 * TIMEOUT_MS);
    // The stall began when the first request was given up (its timeout). Every request of the
    // first round went out before that; every request that arrived after it is a probe.
    const received = await silentHook.received();
    const stalledAt = Math.min(...received.map((entry) => entry.closedAt ?? Number.POSITIVE_INFINITY));
    const probes = received.filter((entry) => entry.at >= stalledAt);
    expect(probes.length).toBeGreaterThan(0);
    // One probe at a time: each goes out once the one before was given up. Without the guard
    // the next round's requests arrive together as the first round's are given up.
    expect(mostAtOnce(probes)).toBe(1);
    // The first round (at most 16 at once) timed out; the rest failed without a request and
    // wait for their retries.
    const attempts = await attemptsOf(account, webhookId);
    const refused = attempts.filter((attempt) => attempt.error === 'endpoint_unresponsive');
    expect(refused.length).toBeGreaterThan(50);
    for (const attempt of refused) {
      expect(attempt.outcome).toBe('failed');
      expect(attempt.duration_ms).toBe(0);
    }
    expect(attempts.filter((attempt) => attempt.error === 'timeout').length).toBeGreaterThan(0);
    // None failed for good before its retries ran out (on a loaded machine this test outlasts a
    // schedule: a message refused at each try fails after its last).
    const lastAttempt = RETRY_SCHEDULE_MS.length + 1;
    for (const message of await messagesOf(account)) {
      expect(message.status === 'pending' || message.attempts === lastAttempt, JSON.stringify(message)).toBe(
        true,
      );
    }
  }, 30_000);

  it('ends the stall when a probe is answered, and the waiting messages are delivered on their retries', async () => {
    const { hook, account, webhookId } = await stalledEndpoint('recovering', 40, await receiver('hang'));
    expect((await attemptsOf(account, webhookId)).some((a) => a.error === 'endpoint_unresponsive')).toBe(
      true,
    );

    hook.answerAlways({ status: 200, body: 'ok' });
    await waitFor(
      async () => (await messagesOf(account)).every((message) => message.status === 'delivered'),
      15_000,
      'every message delivered',
    );
    const ids = new Set(hook.received.map((entry) => entry.headers['webhook-id']));
    expect(ids.size).toBe(40);
  }, 30_000);

  /**
   * The owner's tests: a webhook's (recorded, `sendNow`) and a test send that records nothing
   * (a participation's test delivery goes this way; here to the account webhook's destination).
   */
  const tests = {
    async 'webhook test'(account: TestAccount, webhookId: string) {
      const tested = await t.request({
        method: 'POST',
        url: `/api/v1/settings/webhooks/${webhookId}/test`,
        key: account.apiKey,
      });
      expect(tested.statusCode).toBe(200);
      return tested.json().status_code as number;
    },
    async 'unrecorded test send'(account: TestAccount, webhookId: string) {
      const sent = await t.services.outbound.sendUnrecorded(account.id, {
        channel: 'webhook',
        purpose: 'account',
        destinationId: webhookId,
        type: 'webhook.test',
        data: {},
      });
      return sent!.result.statusCode;
    },
  };

  it.each(Object.keys(tests) as (keyof typeof tests)[])(
    'still sends a %s to a stalled endpoint, and its answer ends the stall',
    async (kindOfTest) => {
      const { hook, account, webhookId } = await stalledEndpoint(
        kindOfTest.replaceAll(' ', '-'),
        20,
        await receiver('hang'),
      );
      // The probes hang; the owner's test is answered. Chosen by the request's type, since a
      // probe can reach the receiver between this line and the test's request.
      hook.answerAlways((entry) => (entry.json?.type === 'webhook.test' ? { status: 204 } : 'hang'));
      expect(await tests[kindOfTest](account, webhookId)).toBe(204);
      // No longer stalled: a new message goes out on its first attempt, while the old probe
      // still hangs (and its timeout, older than the test's answer, changes nothing).
      await bulk(account, 'after-test', 1);
      const [arrived] = await waitFor(
        () => {
          const found = hook.received.filter((entry) => entry.body.includes('after-test-0@stall.test'));
          return found.length > 0 ? found : null;
        },
        5_000,
        'the new message',
      );
      await sleep(TIMEOUT_MS + 300);
      const attempts = await t.db
        .selectFrom('outbound_attempts')
        .select(['attempt', 'error'])
        .where('account_id', '=', account.id)
        .where('message_id', '=', String(arrived!.headers['webhook-id']))
        .orderBy('attempt')
        .execute();
      expect(attempts).toEqual([{ attempt: 1, error: 'timeout' }]);
    },
    30_000,
  );
});

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runInBackground } from '../../src/jobs/background.ts';
import { createDispatcher, type Dispatcher } from '../../src/outbound/dispatcher.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { TIME_ORDERED_UUID } from '../helpers/ids.ts';
import { type Receiver, startReceiver, waitFor } from './receiver.ts';

const silent = { info() {}, warn() {}, error() {} };

describe.each(TEST_DATABASES)('outbound webhooks with real receivers on %s', (kind) => {
  let t: TestApp;
  let dispatcher: Dispatcher;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    t = await startTestApp(kind, {
      outbound: { retryScheduleMs: [100, 150, 150], webhookTimeoutMs: 400, leaseMs: 2_000 },
    });
    dispatcher = createDispatcher(t.services.outbound, silent, { idlePollMs: 20 });
    dispatcher.start();
  });
  afterAll(async () => {
    await dispatcher?.stop(1_000);
    for (const receiver of receivers) await receiver.close();
    await t?.close();
  });

  async function receiver() {
    const started = await startReceiver();
    receivers.push(started);
    return started;
  }

  async function subscribe(account: TestAccount, url: string, events: string[] = ['*']) {
    const response = await t.request({
      method: 'POST',
      url: '/api/v1/settings/webhooks',
      key: account.apiKey,
      body: { url, events },
    });
    expect(response.statusCode).toBe(201);
    return response.json() as { id: string; secret: string };
  }

  const intake = (account: TestAccount, email: string, extra: object = {}) =>
    t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: account.apiKey,
      body: { entity: 'lead', fields: { email }, ...extra },
    });

  async function attemptsOf(account: TestAccount, webhookId: string) {
    const response = await t.request({
      method: 'GET',
      url: `/api/v1/settings/webhooks/${webhookId}/attempts`,
      key: account.apiKey,
    });
    expect(response.statusCode).toBe(200);
    return (
      response.json().attempts as {
        message_id: string;
        outcome: string;
        error: string | null;
        status_code: number | null;
      }[]
    ).reverse();
  }

  /**
   * A webhook pointing at a port where nothing listens, and one record taken in: answers the
   * webhook, the port (to listen on later) and the first failed attempt.
   */
  async function subscribedWhileDown(account: TestAccount, email: string) {
    const down = await startReceiver();
    const port = down.port;
    await down.close();
    const webhook = await subscribe(account, `http://127.0.0.1:${port}/hook`);
    await intake(account, email);
    const [failed] = await waitFor(async () => {
      const list = await attemptsOf(account, webhook.id);
      return list.length >= 1 ? list : null;
    });
    return { webhook, port, failed: failed! };
  }

  async function webhookOf(account: TestAccount, webhookId: string) {
    return (
      await t.request({ method: 'GET', url: `/api/v1/settings/webhooks/${webhookId}`, key: account.apiKey })
    ).json();
  }

  describe('happy path', () => {
    it('sends signed events for intake (single, grouped, bulk, S1), PATCH, notes and record tokens', async () => {
      const account = await accountWithLeads(t);
      const hook = await receiver();
      const webhook = await subscribe(account, hook.url);
      hook.verifyWith(webhook.secret);

      const single = await intake(account, 'single@events.test');
      expect(single.statusCode).toBe(201);
      const grouped = await Promise.all(
        Array.from({ length: 6 }, (_, i) => intake(account, `grouped-${i}@events.test`)),
      );
      const bulk = await t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key: account.apiKey,
        body: {
          records: [
            { entity: 'lead', fields: { email: 'bulk-1@events.test' } },
            { entity: 'lead', fields: { email: 'bulk-2@events.test' } },
          ],
        },
      });
      expect(bulk.statusCode).toBe(200);
      const s1 = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        body: { entity: 'lead', email: 's1@events.test' },
      });
      expect(s1.statusCode).toBeLessThan(300);
      const recordId: string = single.json().id;
      const patched = await t.request({
        method: 'PATCH',
        url: `/api/v1/records/${recordId}`,
        key: account.apiKey,
        body: { fields: { first_name: 'Ada' } },
      });
      expect(patched.statusCode).toBe(200);
      const note = await t.request({
        method: 'POST',
        url: '/api/v1/notes',
        key: account.apiKey,
        body: { record: recordId, body: 'Called back' },
      });
      expect(note.statusCode).toBe(201);

      const token = (
        await t.request({
          method: 'POST',
          url: `/api/v1/records/${recordId}/tokens`,
          key: account.apiKey,
          body: { fields: ['phone'] },
        })
      ).json().token;
      const byToken = await t.request({
        method: 'PATCH',
        url: '/api/v1/records',
        key: token,
        body: { fields: { phone: '+1 555 123456' } },
      });
      expect(byToken.statusCode).toBe(200);

      // Thirteen messages, counted by webhook-id: a message sent twice (below) is not two.
      await waitFor(
        () => new Set(hook.received.map((entry) => entry.headers['webhook-id'])).size >= 13,
        10_000,
        'thirteen webhooks',
      );
      expect(hook.invalid).toEqual([]);
      // Delivery is at least once: on a loaded machine a claim's lease can run out mid-send and the
      // message goes again with the same webhook-id, which is what receivers dedupe by. Count messages.
      const messages = [
        ...new Map(hook.received.map((entry) => [entry.headers['webhook-id'], entry])).values(),
      ];
      const types = messages.map((entry) => entry.json.type);
      expect(types.filter((type) => type === 'record.created')).toHaveLength(10);
      expect(types.filter((type) => type === 'record.updated')).toHaveLength(2);
      expect(types).toContain('note.added');
      const created = hook.received.find(
        (entry) => entry.json.data.record?.id === recordId && entry.json.type === 'record.created',
      )!;
      expect(created.json.data.record).toMatchObject({
        entity: 'lead',
        fields: { email: 'single@events.test' },
      });
      expect(created.json.timestamp).toMatch(/^\d{4}-\d\d-\d\dT/);
      const updated = hook.received.find(
        (entry) => entry.json.type === 'record.updated' && entry.json.data.changed[0] === 'first_name',
      )!;
      expect(updated.json.data).toMatchObject({
        changed: ['first_name'],
        record: { id: recordId, fields: { first_name: 'Ada' } },
      });
      const added = hook.received.find((entry) => entry.json.type === 'note.added')!;
      expect(added.json.data).toMatchObject({ record_id: recordId, note: { body: 'Called back' } });
      // One message per event, each with a webhook-id of its own: an id that came twice (a lease
      // that ran out mid-send, above) is the same message sent again, body for body.
      const bodyById = new Map<string, string>();
      for (const entry of hook.received) {
        const id = String(entry.headers['webhook-id']);
        expect(entry.body).toBe(bodyById.get(id) ?? entry.body);
        bodyById.set(id, entry.body);
      }
      const stored = await t.db
        .selectFrom('outbound_messages')
        .select('id')
        .where('account_id', '=', account.id)
        .execute();
      expect([...bodyById.keys()].sort()).toEqual(stored.map((row) => row.id).sort());
      for (const entry of grouped) expect(entry.statusCode).toBe(201);
    });

    it('sends only subscribed events, and nothing for an account without webhooks', async () => {
      const account = await accountWithLeads(t);
      const hook = await receiver();
      const webhook = await subscribe(account, hook.url, ['note.added']);
      hook.verifyWith(webhook.secret);
      const other = await accountWithLeads(t);
      const record = (await intake(account, 'only-notes@events.test')).json().id;
      expect((await intake(other, 'no-hooks@events.test')).statusCode).toBe(201);
      await t.request({
        method: 'POST',
        url: '/api/v1/notes',
        key: account.apiKey,
        body: { record, body: 'x' },
      });
      await waitFor(() => hook.received.length >= 1, 5_000, 'the note');
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(hook.received.map((entry) => entry.json.type)).toEqual(['note.added']);
      const rows = await t.db
        .selectFrom('outbound_messages')
        .select('id')
        .where('account_id', '=', other.id)
        .execute();
      expect(rows).toEqual([]);
    });

    it('signs with the new and the old secret for a day after a rotation', async () => {
      const account = await accountWithLeads(t);
      const hook = await receiver();
      const webhook = await subscribe(account, hook.url, ['record.created']);
      const rotated = await t.request({
        method: 'PATCH',
        url: `/api/v1/settings/webhooks/${webhook.id}`,
        key: account.apiKey,
        body: { rotate_secret: true },
      });
      expect(rotated.statusCode).toBe(200);
      const { secret } = rotated.json();
      expect(secret).toMatch(/^whsec_/);
      expect(secret).not.toBe(webhook.secret);
      expect(Date.parse(rotated.json().previous_secret_until) - Date.now()).toBeGreaterThan(86_000_000);
      hook.verifyWith(secret, webhook.secret);
      await intake(account, 'rotated@events.test');
      await waitFor(() => hook.received.length >= 1, 5_000, 'the rotated message');
      expect(hook.invalid).toEqual([]);
      expect(String(hook.received[0]!.headers['webhook-signature']).split(' ')).toHaveLength(2);
      // The secret is stored encrypted, never as given.
      const stored = await t.db
        .selectFrom('webhook_destinations')
        .selectAll()
        .where('id', '=', webhook.id)
        .executeTakeFirstOrThrow();
      expect(JSON.stringify(stored)).not.toContain(secret.slice(6));
    });

    it('test sends a webhook.test message now and answers what the receiver said', async () => {
      const account = await accountWithLeads(t);
      const hook = await receiver();
      const webhook = await subscribe(account, hook.url);
      hook.verifyWith(webhook.secret);
      hook.answerNext({ status: 202, body: 'got it' });
      const tested = await t.request({
        method: 'POST',
        url: `/api/v1/settings/webhooks/${webhook.id}/test`,
        key: account.apiKey,
      });
      expect(tested.statusCode).toBe(200);
      expect(tested.json()).toMatchObject({ delivered: true, status_code: 202, body: 'got it', error: null });
      expect(hook.received[0]!.json.type).toBe('webhook.test');
      expect(hook.received[0]!.headers['webhook-id']).toBe(tested.json().message_id);
      const attempts = await attemptsOf(account, webhook.id);
      expect(attempts).toMatchObject([
        { message_id: tested.json().message_id, outcome: 'delivered', status_code: 202 },
      ]);
    });
    it('lists successful attempts kept on their messages with the failed ones, newest first, paged alike', async () => {
      const account = await accountWithLeads(t);
      const hook = await receiver();
      const webhook = await subscribe(account, hook.url, ['record.created']);
      hook.verifyWith(webhook.secret);
      hook.answerNext({ status: 500, body: 'boom' });
      for (const email of [
        'kept1@events.test',
        'kept2@events.test',
        'kept3@events.test',
        'kept4@events.test',
      ]) {
        expect((await intake(account, email)).statusCode).toBe(201);
      }
      type Listed = {
        id: string;
        message_id: string;
        event: string;
        attempt: number;
        outcome: string;
        status_code: number | null;
        response: string | null;
        error: string | null;
        duration_ms: number;
        attempted_at: string;
      };
      const page = async (limit: number, cursor?: string) => {
        const query = cursor ? `?limit=${limit}&cursor=${cursor}` : `?limit=${limit}`;
        const response = await t.request({
          method: 'GET',
          url: `/api/v1/settings/webhooks/${webhook.id}/attempts${query}`,
          key: account.apiKey,
        });
        expect(response.statusCode).toBe(200);
        return response.json() as { attempts: Listed[]; next_cursor: string | null };
      };
      const all = await waitFor(async () => {
        const listed = await page(100);
        return listed.attempts.filter((a) => a.outcome === 'delivered').length === 4 ? listed.attempts : null;
      });
      expect(all).toHaveLength(5);
      const failed = all.filter((a) => a.outcome === 'failed');
      expect(failed).toMatchObject([{ attempt: 1, status_code: 500, response: 'boom', error: 'http_500' }]);
      expect(failed[0]!.id).not.toBe(failed[0]!.message_id);
      // Attempt rows and messages have time-ordered ids (docs/decisions.md, Time-ordered ids).
      for (const attempt of all) expect(attempt.message_id).toMatch(TIME_ORDERED_UUID);
      expect(failed[0]!.id).toMatch(TIME_ORDERED_UUID);
      const delivered = all.filter((a) => a.outcome === 'delivered');
      for (const attempt of delivered) {
        // A kept attempt answers with its message's id, the same on every read.
        expect(attempt).toMatchObject({
          id: attempt.message_id,
          event: 'record.created',
          status_code: 200,
          error: null,
        });
        expect(attempt.duration_ms).toBeGreaterThanOrEqual(0);
      }
      expect(delivered.find((a) => a.message_id === failed[0]!.message_id)?.attempt).toBe(2);
      expect(delivered.filter((a) => a.attempt === 1)).toHaveLength(3);
      const order = [...all].sort((a, b) =>
        a.attempted_at === b.attempted_at ? (a.id < b.id ? 1 : -1) : a.attempted_at < b.attempted_at ? 1 : -1,
      );
      expect(all).toEqual(order);
      // Only the failure is an attempt row.
      const rows = await t.db
        .selectFrom('outbound_attempts')
        .select('outcome')
        .where('account_id', '=', account.id)
        .execute();
      expect(rows).toEqual([{ outcome: 'failed' }]);
      // Pages of two walk the same list, across both kinds.
      const paged: Listed[] = [];
      let cursor: string | undefined;
      for (let pages = 0; pages < 5; pages++) {
        const next = await page(2, cursor);
        paged.push(...next.attempts);
        if (!next.next_cursor) break;
        cursor = next.next_cursor;
      }
      expect(paged).toEqual(all);
      expect(await page(100)).toEqual({ attempts: all, next_cursor: null });
    });
  });

  describe('errors', () => {
    it('retries a 500 with the same webhook-id and records both attempts', async () => {
      const account = await accountWithLeads(t);
      const hook = await receiver();
      const webhook = await subscribe(account, hook.url);
      hook.verifyWith(webhook.secret);
      hook.answerNext({ status: 500, body: 'boom' });
      await intake(account, 'retry@events.test');
      await waitFor(() => hook.received.length >= 2, 5_000, 'the retry');
      expect(hook.received[0]!.headers['webhook-id']).toBe(hook.received[1]!.headers['webhook-id']);
      expect(hook.received[1]!.at - hook.received[0]!.at).toBeGreaterThanOrEqual(90);
      const attempts = await waitFor(async () => {
        const list = await attemptsOf(account, webhook.id);
        return list.length >= 2 ? list : null;
      });
      expect(attempts.map((a) => [a.outcome, a.status_code])).toEqual([
        ['failed', 500],
        ['delivered', 200],
      ]);
      expect((await webhookOf(account, webhook.id)).failing_since).toBeNull();
    });

    it('deletes a webhook with its messages and their attempts, and fails a message written for it meanwhile without a request', async () => {
      const account = await accountWithLeads(t);
      const { webhook, failed } = await subscribedWhileDown(account, 'deleted@events.test');
      const deleted = await t.request({
        method: 'DELETE',
        url: `/api/v1/settings/webhooks/${webhook.id}`,
        key: account.apiKey,
      });
      expect(deleted.statusCode).toBe(204);
      const left = await t.db
        .selectFrom('outbound_messages')
        .select('id')
        .where('account_id', '=', account.id)
        .where('destination_id', '=', webhook.id)
        .execute();
      expect(left).toEqual([]);
      const attempts = await t.db
        .selectFrom('outbound_attempts')
        .select('id')
        .where('account_id', '=', account.id)
        .where('message_id', '=', failed.message_id)
        .execute();
      expect(attempts).toEqual([]);
      // A writer that still had the webhook among its subscriptions (they are remembered for two
      // seconds) writes a message for it after the deletion: it fails, nothing is sent.
      const late = await t.services.outbound.enqueueWebhook(t.db, account.id, {
        destinationId: webhook.id,
        type: 'record.created',
        data: { record: { id: 'late' } },
      });
      const message = await waitFor(async () => {
        const row = await t.db
          .selectFrom('outbound_messages')
          .select(['status', 'attempts', 'last_error'])
          .where('account_id', '=', account.id)
          .where('id', '=', late)
          .executeTakeFirstOrThrow();
        return row.status === 'failed' ? row : null;
      });
      expect(message).toEqual({ status: 'failed', attempts: 1, last_error: 'destination_missing' });
    });

    it('delivers later to a receiver that was down, with the same webhook-id', async () => {
      const account = await accountWithLeads(t);
      const { webhook, port, failed } = await subscribedWhileDown(account, 'down@events.test');
      expect(failed).toMatchObject({ outcome: 'failed', error: 'network_error' });
      const up = await startReceiver(port);
      receivers.push(up);
      up.verifyWith(webhook.secret);
      await waitFor(() => up.received.length >= 1, 5_000, 'the late delivery');
      expect(up.received[0]!.headers['webhook-id']).toBe(failed.message_id);
    });

    it('disables the webhook at once on 410', async () => {
      const account = await accountWithLeads(t);
      const hook = await receiver();
      const webhook = await subscribe(account, hook.url);
      hook.verifyWith(webhook.secret);
      hook.answerAlways({ status: 410 });
      await intake(account, 'gone@events.test');
      await waitFor(async () => (await webhookOf(account, webhook.id)).enabled === false, 5_000, 'disabling');
      const disabled = await webhookOf(account, webhook.id);
      expect(disabled).toMatchObject({ enabled: false, disabled_reason: 'gone' });
      // Being switched off changed the webhook: its updated_at says when.
      expect(disabled.updated_at > disabled.created_at).toBe(true);
      await intake(account, 'after-gone@events.test');
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(hook.received).toHaveLength(1);
      // PATCH enabled:true brings it back.
      hook.answerAlways({ status: 200 });
      const enabled = await t.request({
        method: 'PATCH',
        url: `/api/v1/settings/webhooks/${webhook.id}`,
        key: account.apiKey,
        body: { enabled: true },
      });
      expect(enabled.json()).toMatchObject({ enabled: true, disabled_reason: null });
      await intake(account, 'back@events.test');
      await waitFor(() => hook.received.length >= 2, 5_000, 'delivery after re-enabling');
    });

    it('waits as long as Retry-After asks when it is longer than the next delay', async () => {
      const account = await accountWithLeads(t);
      const hook = await receiver();
      const webhook = await subscribe(account, hook.url);
      hook.verifyWith(webhook.secret);
      hook.answerNext({ status: 429, headers: { 'retry-after': '1' } });
      await intake(account, 'slow-down@events.test');
      await waitFor(() => hook.received.length >= 2, 5_000, 'the retry after Retry-After');
      expect(hook.received[1]!.at - hook.received[0]!.at).toBeGreaterThanOrEqual(950);
    });

    it('starts each retry at the due time it stored, not at the next look for due messages', async () => {
      // A sub-second schedule (decisions §12) and looks a second apart. Left to the looks, the
      // second retry starts about a second after the first, some 500 ms past its due time;
      // woken by the dispatcher at its due time, within a few ms. The tolerance is a fifth of
      // the look's interval: room for a loaded machine, whose process may wait for a CPU.
      const schedule = [200, 400, 800];
      const tolerance = 200;
      const timely = await startTestApp(kind, {
        outbound: { retryScheduleMs: schedule, webhookTimeoutMs: 1_000, leaseMs: 5_000 },
      });
      const local = createDispatcher(timely.services.outbound, silent, { idlePollMs: 1_000 });
      local.start();
      try {
        const account = await accountWithLeads(timely);
        const hook = await receiver();
        const created = await timely.request({
          method: 'POST',
          url: '/api/v1/settings/webhooks',
          key: account.apiKey,
          body: { url: hook.url, events: ['record.created'] },
        });
        hook.verifyWith(created.json().secret);
        // Written as the workers' own work (an automation's webhook): a request's write would
        // pace the claims for half a second while the machine's CPUs are contended, a rule of
        // its own (Outbound messages in docs/decisions.md).
        const send = (id: string) =>
          runInBackground(() =>
            timely.services.outbound.enqueueWebhook(timely.db, account.id, {
              destinationId: created.json().id,
              type: 'record.created',
              data: { record: { id } },
            }),
          );
        const delivered = (id: string) =>
          waitFor(async () => {
            const row = await timely.db
              .selectFrom('outbound_messages')
              .select(['status', 'attempts'])
              .where('account_id', '=', account.id)
              .where('id', '=', id)
              .executeTakeFirstOrThrow();
            return row.status === 'delivered' ? row : null;
          }, 10_000);
        // A first message failed once and sent again: the statements and the connection are
        // warm, so that what is measured below is when retries start, not a first use's cost.
        hook.answerNext({ status: 500 });
        await delivered(await send('warm-up'));
        hook.answerNext({ status: 500 }, { status: 503 }, { status: 500 });
        // While an attempt waits for its answer, its message row still holds the due time it was
        // claimed for (the next one is written after the answer).
        const timings: { at: number; dueAt: number }[] = [];
        hook.beforeAnswering(async (entry) => {
          const row = await timely.db
            .selectFrom('outbound_messages')
            .select('next_attempt_at')
            .where('account_id', '=', account.id)
            .where('id', '=', String(entry.headers['webhook-id']))
            .executeTakeFirstOrThrow();
          timings.push({ at: entry.at, dueAt: row.next_attempt_at.getTime() });
        });
        expect(await delivered(await send('on-time'))).toEqual({ status: 'delivered', attempts: 4 });
        expect(timings).toHaveLength(4);
        for (let retry = 1; retry < timings.length; retry++) {
          const { at, dueAt } = timings[retry]!;
          // Never before its due time, which is at least its delay after the previous attempt…
          expect(dueAt - timings[retry - 1]!.at).toBeGreaterThanOrEqual(schedule[retry - 1]!);
          expect(at).toBeGreaterThanOrEqual(dueAt);
          // …and started soon after it.
          expect(at - dueAt, `retry ${retry} started ${at - dueAt} ms after its due time`).toBeLessThan(
            tolerance,
          );
        }
      } finally {
        await local.stop(1_000);
        await timely.close();
      }
    });

    it('counts a hang past the timeout as a failed attempt and retries', async () => {
      const account = await accountWithLeads(t);
      const hook = await receiver();
      const webhook = await subscribe(account, hook.url);
      hook.verifyWith(webhook.secret);
      hook.answerNext('hang');
      await intake(account, 'hang@events.test');
      await waitFor(() => hook.received.length >= 2, 5_000, 'the retry after the timeout');
      const attempts = await waitFor(async () => {
        const list = await attemptsOf(account, webhook.id);
        return list.length >= 2 ? list : null;
      });
      expect(attempts[0]).toMatchObject({ outcome: 'failed', error: 'timeout', status_code: null });
      expect(attempts[1]).toMatchObject({ outcome: 'delivered' });
    });

    it('does not follow a redirect: a 3xx is a failed attempt', async () => {
      const account = await accountWithLeads(t);
      const hook = await receiver();
      const target = await receiver();
      const webhook = await subscribe(account, hook.url);
      hook.verifyWith(webhook.secret);
      target.verifyWith(webhook.secret);
      hook.answerAlways({ status: 302, headers: { location: target.url } });
      await intake(account, 'redirect@events.test');
      const attempts = await waitFor(async () => {
        const list = await attemptsOf(account, webhook.id);
        return list.length >= 4 ? list : null;
      });
      expect(attempts.every((a) => a.outcome === 'failed' && a.error === 'http_302')).toBe(true);
      expect(target.received).toEqual([]);
      const [message] = await t.db
        .selectFrom('outbound_messages')
        .select(['status', 'attempts'])
        .where('destination_id', '=', webhook.id)
        .execute();
      expect(message).toEqual({ status: 'failed', attempts: 4 });
    });

    it('disables a webhook whose messages all failed for the configured time', async () => {
      const fast = await startTestApp(kind, {
        outbound: { retryScheduleMs: [50, 50, 50, 50], disableAfterMs: 100 },
      });
      const local = createDispatcher(fast.services.outbound, silent, { idlePollMs: 20 });
      local.start();
      try {
        const account = await accountWithLeads(fast);
        const hook = await receiver();
        hook.answerAlways({ status: 503 });
        const created = await fast.request({
          method: 'POST',
          url: '/api/v1/settings/webhooks',
          key: account.apiKey,
          body: { url: hook.url, events: ['*'] },
        });
        hook.verifyWith(created.json().secret);
        await fast.request({
          method: 'POST',
          url: '/api/v1/records',
          key: account.apiKey,
          body: { entity: 'lead', fields: { email: 'failing@events.test' } },
        });
        const disabled = await waitFor(
          async () => {
            const read = (
              await fast.request({
                method: 'GET',
                url: `/api/v1/settings/webhooks/${created.json().id}`,
                key: account.apiKey,
              })
            ).json();
            return read.enabled === false ? read : null;
          },
          5_000,
          'disabling after failures',
        );
        expect(disabled).toMatchObject({ disabled_reason: 'failing' });
        expect(disabled.failing_since).not.toBeNull();
      } finally {
        await local.stop(1_000);
        await fast.close();
      }
    });

    it('sends nothing for a change whose transaction rolled back, or a refused PATCH', async () => {
      const account = await accountWithLeads(t);
      const hook = await receiver();
      const webhook = await subscribe(account, hook.url);
      hook.verifyWith(webhook.secret);
      await expect(
        t.db.transaction().execute(async (tx) => {
          await t.services.outbound.emitEvent(tx, account.id, 'record.created', { record: { id: 'x' } });
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      const record = (await intake(account, 'rollback@events.test')).json().id;
      await waitFor(() => hook.received.length >= 1, 5_000, 'the creation');
      const refused = await t.request({
        method: 'PATCH',
        url: `/api/v1/records/${record}`,
        key: account.apiKey,
        body: { fields: { email: '' } },
      });
      expect(refused.statusCode).toBe(422);
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(hook.received.map((entry) => entry.json.type)).toEqual(['record.created']);
      const count = await t.db
        .selectFrom('outbound_messages')
        .select(sql<number>`count(*)::int`.as('n'))
        .where('account_id', '=', account.id)
        .executeTakeFirstOrThrow();
      expect(count.n).toBe(1);
    });

    it('sends a message whose sender died after claiming it once the lease ran out', async () => {
      const account = await accountWithLeads(t);
      const hook = await receiver();
      const webhook = await subscribe(account, hook.url);
      hook.verifyWith(webhook.secret);
      await local(async () => {
        await intake(account, 'lease@events.test');
      });
      // A sender claims it and dies (never finishes); the dispatcher leaves it alone until the lease ends.
      const { messages } = await t.services.outbound.claimDue(10);
      const claimedAt = Date.now();
      expect(messages.map((m) => m.destination_id)).toContain(webhook.id);
      dispatcher.start();
      await waitFor(() => hook.received.length >= 1, 6_000, 'the send after the lease');
      expect(hook.received[0]!.at - claimedAt).toBeGreaterThanOrEqual(1_500);
    });
  });

  /** Runs `work` with the shared dispatcher stopped (it is not restarted here). */
  async function local(work: () => Promise<void>) {
    await dispatcher.stop(1_000);
    await work();
  }

  describe('security', () => {
    it('refuses a private address unless private addresses are allowed, and does not retry', async () => {
      const strict = await startTestApp(kind, {
        fetchAllowPrivate: false,
        outbound: { retryScheduleMs: [50, 50] },
      });
      const local = createDispatcher(strict.services.outbound, silent, { idlePollMs: 20 });
      local.start();
      try {
        const account = await accountWithLeads(strict);
        const hook = await receiver();
        const created = (
          await strict.request({
            method: 'POST',
            url: '/api/v1/settings/webhooks',
            key: account.apiKey,
            body: { url: hook.url, events: ['*'] },
          })
        ).json();
        await strict.request({
          method: 'POST',
          url: '/api/v1/records',
          key: account.apiKey,
          body: { entity: 'lead', fields: { email: 'private@events.test' } },
        });
        const attempts = await waitFor(async () => {
          const list = (
            await strict.request({
              method: 'GET',
              url: `/api/v1/settings/webhooks/${created.id}/attempts`,
              key: account.apiKey,
            })
          ).json().attempts;
          return list.length >= 1 ? list : null;
        });
        expect(attempts[0]).toMatchObject({ outcome: 'failed', error: 'blocked_address' });
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(hook.received).toEqual([]);
        const [message] = await strict.db
          .selectFrom('outbound_messages')
          .select(['status', 'attempts'])
          .where('account_id', '=', account.id)
          .execute();
        expect(message).toEqual({ status: 'failed', attempts: 1 });
      } finally {
        await local.stop(1_000);
        await strict.close();
      }
    });
  });
});

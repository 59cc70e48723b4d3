import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDispatcher, type Dispatcher } from '../../src/outbound/dispatcher.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { type Receiver, startReceiver, waitFor } from './receiver.ts';

const silent = { info() {}, warn() {}, error() {} };
/** Two retries 50 ms apart: a message fails for good within a fraction of a second. */
const SCHEDULE = [50, 50];

/**
 * `POST /api/v1/settings/webhooks/{id}/recover`: after a receiver's outage, the messages that
 * failed within a window are sent once more each, with their own ids, to a real receiver.
 */
describe.each(TEST_DATABASES)('recovering failed webhook messages on %s', (kind) => {
  let t: TestApp;
  let dispatcher: Dispatcher;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    t = await startTestApp(kind, { outbound: { retryScheduleMs: SCHEDULE, webhookTimeoutMs: 1_000 } });
    dispatcher = createDispatcher(t.services.outbound, silent, { idlePollMs: 20 });
    dispatcher.start();
  });
  afterAll(async () => {
    await dispatcher?.stop(1_000);
    for (const receiver of receivers) await receiver.close();
    await t?.close();
  });

  /** An account with a webhook on a receiver that answers 503 until told otherwise. */
  async function failingWebhook() {
    const account = await accountWithLeads(t);
    const receiver = await startReceiver();
    receivers.push(receiver);
    receiver.answerAlways({ status: 503 });
    const created = await t.request({
      method: 'POST',
      url: '/api/v1/settings/webhooks',
      key: account.apiKey,
      body: { url: receiver.url, events: ['record.created'] },
    });
    expect(created.statusCode, created.body).toBe(201);
    receiver.verifyWith(created.json().secret);
    return { account, receiver, webhookId: created.json().id as string };
  }

  /** Takes in a record and waits until its message has failed for good; answers the message id. */
  async function failedMessage(account: TestAccount, receiver: Receiver, email: string): Promise<string> {
    const created = await t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: account.apiKey,
      body: { entity: 'lead', fields: { email } },
    });
    expect(created.statusCode, created.body).toBe(201);
    const recordId = created.json().id as string;
    const messageId = await waitFor(
      () =>
        receiver.received.find((entry) => entry.json.data.record?.id === recordId)?.headers[
          'webhook-id'
        ] as string,
      5_000,
      `the first attempt for ${email}`,
    );
    await waitFor(
      async () => (await messageOf(account, messageId))?.status === 'failed',
      5_000,
      'the failure',
    );
    return messageId;
  }

  const messageOf = (account: TestAccount, id: string) =>
    t.db
      .selectFrom('outbound_messages')
      .select(['status', 'attempts'])
      .where('account_id', '=', account.id)
      .where('id', '=', id)
      .executeTakeFirst();

  const recover = (account: TestAccount, webhookId: string, body: unknown, key = account.apiKey) =>
    t.request({ method: 'POST', url: `/api/v1/settings/webhooks/${webhookId}/recover`, key, body });

  const receivedIds = (receiver: Receiver, after: number) =>
    receiver.received.slice(after).map((entry) => entry.headers['webhook-id'] as string);

  describe('happy path', () => {
    it('sends each failed message once more with its own id, and not a test message', async () => {
      const { account, receiver, webhookId } = await failingWebhook();
      const since = new Date(Date.now() - 1_000).toISOString();
      const ids = [
        await failedMessage(account, receiver, 'one@recover.test'),
        await failedMessage(account, receiver, 'two@recover.test'),
      ];
      const tested = await t.request({
        method: 'POST',
        url: `/api/v1/settings/webhooks/${webhookId}/test`,
        key: account.apiKey,
      });
      expect(tested.json()).toMatchObject({ delivered: false, status_code: 503 });
      for (const id of ids) expect(await messageOf(account, id)).toEqual({ status: 'failed', attempts: 3 });

      receiver.answerAlways({ status: 204 });
      const before = receiver.received.length;
      const answer = await recover(account, webhookId, { since });
      expect(answer.statusCode, answer.body).toBe(202);
      expect(answer.json()).toEqual({ requeued: 2, more: false });
      await waitFor(() => receiver.received.length >= before + 2, 5_000, 'the resent messages');
      for (const id of ids) {
        await waitFor(async () => (await messageOf(account, id))?.status === 'delivered', 5_000, 'delivery');
        expect(await messageOf(account, id)).toEqual({ status: 'delivered', attempts: 4 });
      }
      // Nothing else comes: not the test message, not a second copy.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(receivedIds(receiver, before).sort()).toEqual([...ids].sort());

      // Delivered messages are not failed any more: a second call finds none.
      expect((await recover(account, webhookId, { since })).json()).toEqual({ requeued: 0, more: false });
    });

    it('takes only the messages written within the window', async () => {
      const { account, receiver, webhookId } = await failingWebhook();
      const early = await failedMessage(account, receiver, 'early@recover.test');
      await new Promise((resolve) => setTimeout(resolve, 20));
      const between = new Date().toISOString();
      await new Promise((resolve) => setTimeout(resolve, 20));
      const late = await failedMessage(account, receiver, 'late@recover.test');
      await new Promise((resolve) => setTimeout(resolve, 20));
      const end = new Date().toISOString();
      const latest = await failedMessage(account, receiver, 'latest@recover.test');

      receiver.answerAlways({ status: 200 });
      const before = receiver.received.length;
      const answer = await recover(account, webhookId, { since: between, until: end });
      expect(answer.json()).toEqual({ requeued: 1, more: false });
      await waitFor(() => receiver.received.length > before, 5_000, 'the resent message');
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(receivedIds(receiver, before)).toEqual([late]);
      expect((await messageOf(account, early))?.status).toBe('failed');
      expect((await messageOf(account, latest))?.status).toBe('failed');
    });

    it('gives each message one more attempt, not the retry schedule again', async () => {
      const { account, receiver, webhookId } = await failingWebhook();
      const since = new Date(Date.now() - 1_000).toISOString();
      const id = await failedMessage(account, receiver, 'still@recover.test');
      const before = receiver.received.length;
      expect((await recover(account, webhookId, { since })).json()).toEqual({ requeued: 1, more: false });
      await waitFor(async () => (await messageOf(account, id))?.attempts === 4, 5_000, 'the one attempt');
      await waitFor(async () => (await messageOf(account, id))?.status === 'failed', 5_000, 'the failure');
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(receivedIds(receiver, before)).toEqual([id]);
      expect(await messageOf(account, id)).toEqual({ status: 'failed', attempts: 4 });
    });

    it('answers `more` when the window holds more failed messages than one call takes, oldest first', async () => {
      const { account, receiver, webhookId } = await failingWebhook();
      const since = new Date(Date.now() - 1_000);
      const ids = [
        await failedMessage(account, receiver, 'a@more.test'),
        await failedMessage(account, receiver, 'b@more.test'),
        await failedMessage(account, receiver, 'c@more.test'),
      ];
      receiver.answerAlways({ status: 200 });
      const window = { since, until: new Date() };
      const first = await t.services.outbound.requeueFailed(account.id, webhookId, window, 2);
      expect(first).toEqual({ ids: expect.any(Array), more: true });
      expect([...first.ids].sort()).toEqual(ids.slice(0, 2).sort());
      for (const id of ids.slice(0, 2)) {
        await waitFor(async () => (await messageOf(account, id))?.status === 'delivered', 5_000, 'delivery');
      }
      const second = await t.services.outbound.requeueFailed(account.id, webhookId, window, 2);
      expect(second).toEqual({ ids: [ids[2]], more: false });
    });
  });

  describe('errors', () => {
    it('refuses a disabled webhook until it is enabled again, then resends what failed', async () => {
      const { account, receiver, webhookId } = await failingWebhook();
      const since = new Date(Date.now() - 1_000).toISOString();
      receiver.answerNext({ status: 410 });
      const gone = await failedMessage(account, receiver, 'gone@recover.test');
      const read = await t.request({
        method: 'GET',
        url: `/api/v1/settings/webhooks/${webhookId}`,
        key: account.apiKey,
      });
      expect(read.json()).toMatchObject({ enabled: false, disabled_reason: 'gone' });
      const refused = await recover(account, webhookId, { since });
      expect(refused.statusCode).toBe(409);
      expect(refused.json()).toMatchObject({ error: 'conflict' });
      expect(await messageOf(account, gone)).toEqual({ status: 'failed', attempts: 1 });

      const enabled = await t.request({
        method: 'PATCH',
        url: `/api/v1/settings/webhooks/${webhookId}`,
        key: account.apiKey,
        body: { enabled: true },
      });
      expect(enabled.json().enabled).toBe(true);
      // A message that failed at its first attempt (not retried: 410) gets one attempt too, not
      // the rest of its schedule: still answered 503, it fails again after that one.
      const before = receiver.received.length;
      expect((await recover(account, webhookId, { since })).json()).toEqual({ requeued: 1, more: false });
      await waitFor(async () => (await messageOf(account, gone))?.attempts === 2, 5_000, 'the one attempt');
      await waitFor(async () => (await messageOf(account, gone))?.status === 'failed', 5_000, 'the failure');
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await messageOf(account, gone)).toEqual({ status: 'failed', attempts: 2 });
      expect(receivedIds(receiver, before)).toEqual([gone]);

      receiver.answerAlways({ status: 200 });
      expect((await recover(account, webhookId, { since })).json()).toEqual({ requeued: 1, more: false });
      await waitFor(async () => (await messageOf(account, gone))?.status === 'delivered', 5_000, 'delivery');
      expect(receivedIds(receiver, before)).toEqual([gone, gone]);
    });

    it('refuses a window that ends before it starts, and a body that is not one', async () => {
      const { account, webhookId } = await failingWebhook();
      const now = new Date().toISOString();
      const backwards = await recover(account, webhookId, { since: now, until: now });
      expect(backwards.statusCode).toBe(422);
      expect(backwards.json().details).toEqual([
        expect.objectContaining({ key: 'until', reason: 'out_of_range' }),
      ]);
      for (const body of [{}, { since: 'yesterday' }, { since: now, limit: 5 }, { since: 5 }]) {
        const answer = await recover(account, webhookId, body);
        expect(answer.statusCode, JSON.stringify(body)).toBe(422);
        expect(answer.json().error).toBe('validation_failed');
      }
    });

    it('answers 404 for an unknown webhook', async () => {
      const { account } = await failingWebhook();
      const answer = await recover(account, '00000000-0000-4000-8000-000000000000', {
        since: new Date().toISOString(),
      });
      expect(answer.statusCode).toBe(404);
    });
  });

  describe('security', () => {
    it("answers 404 for another account's webhook and requeues nothing of it", async () => {
      const { account, receiver, webhookId } = await failingWebhook();
      const since = new Date(Date.now() - 1_000).toISOString();
      const id = await failedMessage(account, receiver, 'theirs@recover.test');
      const other = await t.createAccount();
      const answer = await recover(other, webhookId, { since });
      expect(answer.statusCode).toBe(404);
      expect((await messageOf(account, id))?.status).toBe('failed');
    });

    it('needs a key with settings and records:read; no key is 401', async () => {
      const { account, webhookId } = await failingWebhook();
      const since = new Date().toISOString();
      const keyWith = async (permissions: string[]) => {
        const made = await t.request({
          method: 'POST',
          url: '/api/v1/settings/api-keys',
          key: account.apiKey,
          body: { name: `key ${permissions.join(' ')}`, permissions },
        });
        expect(made.statusCode, made.body).toBe(201);
        return made.json().key as string;
      };
      for (const permissions of [['settings'], ['records:read']]) {
        const answer = await recover(account, webhookId, { since }, await keyWith(permissions));
        expect(answer.statusCode, permissions.join()).toBe(403);
      }
      const allowed = await recover(
        account,
        webhookId,
        { since },
        await keyWith(['settings', 'records:read']),
      );
      expect(allowed.statusCode).toBe(202);
      const anonymous = await t.request({
        method: 'POST',
        url: `/api/v1/settings/webhooks/${webhookId}/recover`,
        body: { since },
      });
      expect(anonymous.statusCode).toBe(401);
    });
  });
});

// Resending a webhook's failed messages from its screen in real Chromium: a real receiver that
// was down, the outbound engine's dispatcher sending, the effect checked at the receiver.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDispatcher, type Dispatcher } from '../../src/outbound/dispatcher.ts';
import type { TestAccount } from '../helpers/app.ts';
import { oneDatabase } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { type Receiver, startReceiver, waitFor } from '../outbound/receiver.ts';
import { addPersonWithPassword, PASSWORD } from '../people/support.ts';
import {
  type ConsoleServer,
  checkAccessibility,
  hasChromium,
  newPage,
  pageProblems,
  signInContext,
  startConsoleServer,
} from './browser.ts';

const silent = { info() {}, warn() {}, error() {} };

describe.skipIf(!hasChromium).each(oneDatabase('postgres'))(
  'resending failed webhook messages in the console on %s',
  (kind) => {
    let server: ConsoleServer;
    let dispatcher: Dispatcher;
    let account: TestAccount;
    let receiver: Receiver;
    const ownerEmail = `owner-${kind}@recover.test`;

    beforeAll(async () => {
      // No retries: a message fails for good at its first failed attempt.
      server = await startConsoleServer(kind, { outbound: { retryScheduleMs: [] } });
      dispatcher = createDispatcher(server.t.services.outbound, silent, { idlePollMs: 20 });
      dispatcher.start();
      account = await accountWithLeads(server.t);
      await addPersonWithPassword(server.t, account, { email: ownerEmail, name: 'Olga Owner' });
      receiver = await startReceiver();
    });
    afterAll(async () => {
      await dispatcher?.stop(1_000);
      await receiver?.close();
      await server?.close();
    });

    it('resends the messages that failed since the time given, and says how many', async () => {
      const created = await server.t.request({
        method: 'POST',
        url: '/api/v1/settings/webhooks',
        key: account.apiKey,
        body: { url: receiver.url, events: ['record.created'] },
      });
      expect(created.statusCode).toBe(201);
      const webhookId = created.json().id as string;
      receiver.verifyWith(created.json().secret);
      receiver.answerAlways({ status: 503 });
      for (const email of ['one@outage.test', 'two@outage.test']) {
        const record = await server.t.request({
          method: 'POST',
          url: '/api/v1/records',
          key: account.apiKey,
          body: { entity: 'lead', fields: { email } },
        });
        expect(record.statusCode).toBe(201);
      }
      const failed = () =>
        server.t.db
          .selectFrom('outbound_messages')
          .select(['id', 'status'])
          .where('account_id', '=', account.id)
          .where('status', '=', 'failed')
          .execute();
      const ids = (
        await waitFor(async () => (await failed()).length === 2 && failed(), 5_000, 'two failures')
      ).map((row) => row.id);
      receiver.answerAlways({ status: 200 });
      const before = receiver.received.length;

      const { context, page } = await newPage(server);
      try {
        await signInContext(context, server.base, ownerEmail, PASSWORD);
        await page.goto(`/settings/webhooks/${webhookId}`);
        await page.getByRole('heading', { level: 2, name: 'Resend failed messages' }).waitFor();
        // Preset to an hour before the endpoint started failing: both failures are after it.
        expect(await page.getByLabel('Failed since').inputValue()).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$/);
        await page.getByRole('button', { name: 'Resend failed messages' }).click();
        await page.getByText('2 failed messages queued for one more attempt.').waitFor();
        await waitFor(() => receiver.received.length >= before + 2, 5_000, 'the resent messages');
        const resent = receiver.received.slice(before).map((entry) => entry.headers['webhook-id'] as string);
        expect(resent.sort()).toEqual([...ids].sort());
        await waitFor(async () => (await failed()).length === 0, 5_000, 'deliveries');

        // Nothing failed is left: a second press finds none.
        await page.getByRole('button', { name: 'Resend failed messages' }).click();
        await page.getByText('0 failed messages queued for one more attempt.').waitFor();
        await checkAccessibility(page, 'webhook with recovery');
        expect(pageProblems(page)).toEqual([]);
      } finally {
        await context.close();
      }
    });
  },
);

import type { DatabaseKind } from '../../src/db/client.ts';
import { createDispatcher, type Dispatcher } from '../../src/outbound/dispatcher.ts';
import { startTestApp, type TestAccount, type TestApp, type TestAppOptions } from '../helpers/app.ts';
import { distributionFactory } from '../helpers/distribution-factory.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { type Receiver, startReceiver } from '../outbound/receiver.ts';
import { type SmtpServer, startSmtpServer } from '../outbound/smtp-server.ts';

const silent = { info() {}, warn() {}, error() {} };

/** The app with a real SMTP server and a dispatcher (retries), and receivers made per test. */
export async function startDistributionWorld(kind: DatabaseKind, options: TestAppOptions = {}) {
  const smtp: SmtpServer = await startSmtpServer();
  const t: TestApp = await startTestApp(kind, {
    ...options,
    outbound: {
      smtpUrl: smtp.url,
      mailFrom: 'Leadline <noreply@leads.test>',
      retryScheduleMs: [100, 100],
      webhookTimeoutMs: 2_000,
      ...options.outbound,
    },
  });
  const dispatcher: Dispatcher = createDispatcher(t.services.outbound, silent, { idlePollMs: 20 });
  dispatcher.start();
  const receivers: Receiver[] = [];

  async function receiver() {
    const made = await startReceiver();
    receivers.push(made);
    return made;
  }

  /** An account with the lead entity and the distribution module, its factory, and a record maker. */
  async function account(modules: string[] = ['distribution']) {
    const acc: TestAccount = await accountWithLeads(t, { modules });
    const factory = distributionFactory(t, acc);
    const record = async (fields: Record<string, unknown> = {}) => {
      const response = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: acc.apiKey,
        body: {
          entity: 'lead',
          fields: { email: `${Math.random().toString(36).slice(2)}@lead.test`, ...fields },
        },
      });
      if (response.statusCode !== 201) throw new Error(`record: ${response.body}`);
      return response.json().id as string;
    };
    const start = (recordId: string, key = acc.apiKey) =>
      t.request({
        method: 'POST',
        url: '/api/v1/distribution/distributions',
        key,
        body: { record_id: recordId },
      });
    /** A partner with a webhook participation on a receiver of its own that verifies its secret. */
    const webhookPartner = async (
      distributionId: string,
      input: Omit<Parameters<typeof factory.participation>[1], 'partnerId' | 'address'> & {
        name?: string;
      } = {},
    ) => {
      const hook = await receiver();
      const partnerId = await factory.partner({ name: input.name });
      const participation = await factory.participation(distributionId, {
        ...input,
        partnerId,
        address: hook.url,
      });
      hook.verifyWith(participation.secret!);
      return { partnerId, participationId: participation.id, receiver: hook, secret: participation.secret! };
    };
    /** An account webhook on a receiver of its own for these events, its signatures verified. */
    const subscribe = async (events: string[]) => {
      const hook = await receiver();
      const created = await t.request({
        method: 'POST',
        url: '/api/v1/settings/webhooks',
        key: acc.apiKey,
        body: { url: hook.url, events },
      });
      hook.verifyWith(created.json().secret);
      return hook;
    };
    return { account: acc, factory, record, start, webhookPartner, subscribe };
  }

  return {
    t,
    smtp,
    receiver,
    account,
    async close() {
      await dispatcher.stop(1_000);
      await t.close();
      for (const made of receivers) await made.close();
      await smtp.close();
    },
  };
}

export type DistributionWorld = Awaited<ReturnType<typeof startDistributionWorld>>;

import { expect } from 'vitest';
import type { DatabaseKind } from '../../src/db/client.ts';
import { createDispatcher, type Dispatcher } from '../../src/outbound/dispatcher.ts';
import { startTestApp, type TestAccount, type TestApp, type TestAppOptions } from '../helpers/app.ts';
import { distributionFactory } from '../helpers/distribution-factory.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { type Receiver, startReceiver } from '../outbound/receiver.ts';
import { type SmtpServer, startSmtpServer } from '../outbound/smtp-server.ts';

/** Credentials an account may hold that a distribution route must refuse. */
export interface WrongCredentials {
  /** An API key of the account without the permission the routes need. */
  withoutPermission: string;
  recordToken: string;
  sourceToken: string;
}

/** An account with the lead entity and the distribution module (and CRM, for nothing in particular). */
export function distributionAccount(t: TestApp, modules = ['distribution']): Promise<TestAccount> {
  return accountWithLeads(t, { modules });
}

/** A record token, a source token and a key holding every permission but `missing`. */
export async function wrongCredentials(
  t: TestApp,
  account: TestAccount,
  missing: 'distribution' | 'settings',
): Promise<WrongCredentials> {
  const as = (method: 'POST', url: string, body: object) =>
    t.request({ method, url, key: account.apiKey, body });
  const record = await as('POST', '/api/v1/records', { entity: 'lead', fields: { email: 'who@b.co' } });
  const token = await as('POST', `/api/v1/records/${record.json().id}/tokens`, { fields: ['email'] });
  const source = await as('POST', '/api/v1/settings/sources', { name: `Form ${Math.random()}` });
  const permissions = [
    'records:read',
    'records:write',
    'notes:write',
    'documents:read',
    'crm',
    'distribution',
    'booking',
    'settings',
  ].filter((permission) => permission !== missing);
  const key = await as('POST', '/api/v1/settings/api-keys', { name: `Without ${missing}`, permissions });
  for (const [what, response] of [
    ['record', record],
    ['token', token],
    ['source', source],
    ['key', key],
  ] as const) {
    if (response.statusCode >= 300) throw new Error(`${what}: ${response.statusCode} ${response.body}`);
  }
  return {
    withoutPermission: key.json().key,
    recordToken: token.json().token,
    sourceToken: source.json().token,
  };
}

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * Every route refuses a missing or unknown credential, a record or source token (401), a key
 * without the permission (403 forbidden) and an account without the module (403
 * module_not_enabled).
 */
export async function expectRefusedCredentials(
  t: TestApp,
  routes: readonly (readonly [Method, string, unknown])[],
  wrong: WrongCredentials,
  withoutModule: TestAccount,
): Promise<void> {
  for (const [method, url, body] of routes) {
    const label = `${method} ${url}`;
    const as = (key?: string) => t.request({ method, url, key, body });
    expect((await as()).statusCode, label).toBe(401);
    expect((await as('lk_wrong')).statusCode, label).toBe(401);
    expect((await as(wrong.recordToken)).statusCode, label).toBe(401);
    expect((await as(wrong.sourceToken)).statusCode, label).toBe(401);
    const forbidden = await as(wrong.withoutPermission);
    expect(forbidden.statusCode, label).toBe(403);
    expect(forbidden.json(), label).toEqual({ error: 'forbidden' });
    const notBooked = await as(withoutModule.apiKey);
    expect(notBooked.statusCode, label).toBe(403);
    expect(notBooked.json(), label).toEqual({ error: 'module_not_enabled' });
  }
}

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

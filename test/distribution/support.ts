import { expect } from 'vitest';
import type { TestAccount, TestApp } from '../helpers/app.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

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

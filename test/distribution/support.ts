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
  return { withoutPermission: key.json().key, recordToken: token.json().token, sourceToken: source.json().token };
}

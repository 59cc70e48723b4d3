import { randomBytes } from 'node:crypto';
import type { Config } from '../config.ts';
import type { Db } from '../db/types.ts';
import { generateToken, hashSecret } from '../lib/credentials.ts';
import { createInstanceRepo } from '../modules/instance/instance.repo.ts';
import { FIRST_START_LINK_TTL_MS } from '../modules/people/sessions.service.ts';
import type { Services } from '../services.ts';

export interface InstanceSecrets {
  adminTokenHash: Buffer;
  secret: string;
  /** The generated operator token, only on the start that generated it. */
  newAdminToken?: string;
}

/**
 * The operator token and the HMAC secret: from the environment when set, else generated on the
 * first start and kept in the database (so that every node of an instance agrees). Of the
 * operator token only the hash is kept; it is printed once, when generated.
 */
export async function ensureInstanceSecrets(
  db: Db,
  config: Pick<Config, 'adminToken' | 'secret'>,
): Promise<InstanceSecrets> {
  const repo = createInstanceRepo(db);
  const secret = config.secret ?? (await repo.setOnce('secret', randomBytes(32).toString('base64url')));
  if (config.adminToken) return { adminTokenHash: hashSecret(config.adminToken), secret };
  const candidate = generateToken('adm_');
  const storedHash = await repo.setOnce('admin_token_sha256', hashSecret(candidate).toString('hex'));
  const adminTokenHash = Buffer.from(storedHash, 'hex');
  const generatedNow = adminTokenHash.equals(hashSecret(candidate));
  return { adminTokenHash, secret, ...(generatedNow ? { newAdminToken: candidate } : {}) };
}

/** The demo account's entity (decisions §2): typed fields, an email role, a select field, a pipeline. */
export const DEMO_ENTITY = {
  name: 'Lead',
  fields: [
    { key: 'first_name', label: 'First name', type: 'text', role: 'first_name' },
    { key: 'last_name', label: 'Last name', type: 'text', role: 'last_name' },
    { key: 'email', label: 'Email', type: 'text', format: 'email', required: true, role: 'email' },
    { key: 'phone', label: 'Phone', type: 'text', format: 'phone', role: 'phone' },
    { key: 'company', label: 'Company', type: 'text', role: 'company' },
    { key: 'interest', label: 'Interest', type: 'select', options: ['Solar', 'Heat pump', 'Battery'] },
    { key: 'budget', label: 'Budget', type: 'number', format: 'currency' },
    { key: 'postal_code', label: 'Postal code', type: 'text', format: 'postal_code' },
    { key: 'message', label: 'Message', type: 'textarea' },
    { key: 'consent', label: 'Consent', type: 'boolean' },
    { key: 'attachments', label: 'Attachments', type: 'files' },
  ],
  duplicate_rule: { match: ['email'], action: 'update' },
  pipelines: [{ name: 'Sales', stages: ['New', 'Contacted', 'Qualified', 'Won', 'Lost'] }],
};

/** The demo account's owner, who signs in with the first start's link (decisions §14). */
export const DEMO_OWNER = { email: 'owner@example.com', name: 'Demo Owner' };

export interface DemoAccount {
  accountId: string;
  apiKey: string;
  /** The one-time sign-in token of the demo's owner: `PUBLIC_URL/sign-in/{token}`. */
  signInToken: string;
}

/**
 * Creates the demo account on the very first start of an instance; later starts do nothing. The
 * claim, the account, its key and its entity are written in one transaction: a start that dies
 * half-way leaves nothing, and the next start creates the demo.
 */
export async function createDemoOnce(db: Db, services: Services): Promise<DemoAccount | null> {
  const repo = createInstanceRepo(db);
  if (await repo.get('demo_created_at')) return null;
  return db.transaction().execute(async (tx) => {
    // Two nodes starting at once on a new database: the second one's claim waits for the first
    // transaction, and finds the first claim stored once that commits.
    const claim = new Date().toISOString() + randomBytes(4).toString('hex');
    if ((await repo.setOnce('demo_created_at', claim, tx)) !== claim) return null;
    const account = await services.accounts.create(
      { name: 'Demo', modules: ['crm', 'distribution', 'booking'], isDemo: true },
      tx,
    );
    await repo.set('demo_account_id', account.id, tx);
    await services.entities.put(account.id, 'lead', DEMO_ENTITY, tx);
    const owner = await services.users.create(account.id, { ...DEMO_OWNER, role: 'owner' }, tx);
    const signInToken = await services.sessions.issueLink(account.id, owner.id, FIRST_START_LINK_TTL_MS, tx);
    return { accountId: account.id, apiKey: account.api_key.key, signInToken };
  });
}

export function firstStartBanner(options: {
  publicUrl: string;
  apiKey?: string;
  adminToken?: string;
  signInToken?: string;
}): string {
  const lines = ['', '  Leadline is running at ' + options.publicUrl, ''];
  if (options.adminToken) {
    lines.push(`  Operator token (shown once; /admin/v1): ${options.adminToken}`);
  }
  if (options.signInToken) {
    lines.push(
      `  Sign in as the demo owner (${DEMO_OWNER.email}; the link works once, for 7 days, and lets you set a password):`,
      `    ${options.publicUrl}/sign-in/${options.signInToken}`,
    );
  }
  if (options.apiKey) {
    lines.push(`  Demo account API key (shown once):     ${options.apiKey}`);
    lines.push('', '  Try it:', '');
    lines.push(
      `  curl -s -X POST ${options.publicUrl}/api/v1/records \\`,
      `    -H 'Authorization: Bearer ${options.apiKey}' -H 'Content-Type: application/json' \\`,
      `    -d '{"entity":"lead","fields":{"first_name":"Ada","last_name":"Lovelace","email":"ada@example.com","interest":"Solar"}}'`,
    );
  }
  lines.push('', `  Web console:   ${options.publicUrl}/`, `  API reference: ${options.publicUrl}/docs`, '');
  return lines.join('\n');
}

/**
 * The secrets a first start generated, for a start that shows no banner: they are stored (the
 * operator token as a hash only) and will not be shown again, so they are shown now, without a
 * curl line that would not answer. `heading` says why no banner: a server that could not start
 * serving, or `leads worker` as the first process on a new database.
 */
export function firstStartSecretsNotice(
  heading: string,
  options: {
    apiKey?: string;
    adminToken?: string;
    signInToken?: string;
  },
): string {
  const lines = ['', `  ${heading}`, ''];
  if (options.adminToken) lines.push(`  Operator token (/admin/v1): ${options.adminToken}`);
  if (options.apiKey) lines.push(`  Demo account API key:       ${options.apiKey}`);
  if (options.signInToken)
    lines.push(`  Demo owner's sign-in token: ${options.signInToken} (open PUBLIC_URL/sign-in/<token>)`);
  lines.push('');
  return lines.join('\n');
}

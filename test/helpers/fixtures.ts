import type { TestAccount, TestApp } from './app.ts';

/** A realistic entity: typed fields, roles, a select, a required email, a pipeline. */
export const LEAD_ENTITY = {
  name: 'Lead',
  fields: [
    { key: 'first_name', label: 'First name', type: 'text', role: 'first_name' },
    { key: 'last_name', label: 'Last name', type: 'text', role: 'last_name' },
    { key: 'email', label: 'E-Mail Address', type: 'text', format: 'email', required: true, role: 'email' },
    { key: 'phone', label: 'Phone', type: 'text', format: 'phone', role: 'phone' },
    { key: 'company', label: 'Company', type: 'text', role: 'company' },
    { key: 'interest', label: 'Interest', type: 'select', options: ['Solar', 'Heat pump', 'Battery'] },
    { key: 'topics', label: 'Topics', type: 'multiselect', options: ['Price', 'Installation', 'Funding'] },
    { key: 'budget', label: 'Budget', type: 'number', format: 'currency' },
    { key: 'rooms', label: 'Rooms', type: 'number', format: 'integer' },
    { key: 'consent', label: 'Consent', type: 'boolean' },
    { key: 'birthday', label: 'Birthday', type: 'date' },
    { key: 'callback_at', label: 'Callback at', type: 'datetime' },
    { key: 'utm_source', label: 'UTM source', type: 'text' },
    { key: 'message', label: 'Message', type: 'textarea' },
  ],
  pipelines: [{ name: 'Sales', stages: ['New', 'Contacted', 'Won'] }],
};

export async function putEntity(
  t: TestApp,
  account: TestAccount,
  key: string,
  definition: object,
): Promise<void> {
  const response = await t.request({
    method: 'PUT',
    url: `/api/v1/settings/entities/${key}`,
    key: account.apiKey,
    body: definition,
  });
  if (response.statusCode !== 200) throw new Error(`entity ${key}: ${response.body}`);
}

/** An account with the lead entity (optionally a duplicate rule) and the given modules. */
export async function accountWithLeads(
  t: TestApp,
  options: { modules?: string[]; duplicateRule?: { match: string[]; action: string } } = {},
): Promise<TestAccount> {
  const account = await t.createAccount({ modules: options.modules ?? [] });
  await putEntity(t, account, 'lead', { ...LEAD_ENTITY, duplicate_rule: options.duplicateRule ?? null });
  return account;
}

/** The id of the account's entity with this key. */
export async function entityIdOf(t: Pick<TestApp, 'db'>, accountId: string, key: string): Promise<string> {
  const entity = await t.db
    .selectFrom('entities')
    .select('id')
    .where('account_id', '=', accountId)
    .where('key', '=', key)
    .executeTakeFirstOrThrow();
  return entity.id;
}

/** A record's history as the account reads it (the S1 lead view's latest events), newest first. */
export async function historyOf(t: TestApp, key: string, recordId: string): Promise<string[]> {
  const response = await t.request({ method: 'GET', url: `/api/leads/${recordId}`, key });
  if (response.statusCode !== 200) throw new Error(`history of ${recordId}: ${response.statusCode}`);
  return (response.json().events as { type: string }[]).map((event) => event.type);
}

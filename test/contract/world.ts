import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { PREPARED } from '../../src/db/prepared.ts';
import { ADMIN_TOKEN, type TestApp } from '../helpers/app.ts';
import { LEAD_ENTITY, putEntity } from '../helpers/fixtures.ts';
import type { GenerationHints } from './schema-arbitrary.ts';

/** The entity of every world: the lead fields plus the two file fields. */
export const WORLD_ENTITY = {
  ...LEAD_ENTITY,
  fields: [
    ...LEAD_ENTITY.fields,
    { key: 'attachments', label: 'Attachments', type: 'files' },
    { key: 'contract', label: 'Contract', type: 'file' },
  ],
};

/** Values that fit the world entity's fields, offered for free-form `fields`-like objects. */
const FIELD_VALUES: Record<string, unknown[]> = {
  first_name: ['Ada'],
  last_name: ['Lovelace'],
  email: ['ada@example.com', 'grace@example.org'],
  phone: ['+49 30 1234567'],
  company: ['Analytical Engines Ltd'],
  interest: ['Solar', 'Heat pump'],
  topics: [['Price', 'Funding']],
  budget: [12000, 99.5],
  rooms: [4],
  consent: [true],
  birthday: ['1990-04-01'],
  callback_at: ['2030-01-02T10:00:00Z'],
  utm_source: ['newsletter'],
  message: ['Please call back'],
};

/**
 * A small file the service fetches when a request names it as a document, and the receiver of
 * the world's webhook (`POST /hook`), so that no request waits on an address outside the test.
 */
export interface FileServer {
  base: string;
  close(): Promise<void>;
}

export async function startFileServer(): Promise<FileServer> {
  const server = http.createServer((request, response) => {
    if (request.method === 'POST' && request.url === '/hook') {
      request.resume();
      return request.on('end', () => response.writeHead(204).end());
    }
    if (request.url === '/offer.pdf') {
      response.writeHead(200, { 'content-type': 'application/pdf' });
      return response.end('%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n');
    }
    if (request.url === '/notes.txt') {
      response.writeHead(200, { 'content-type': 'text/plain' });
      return response.end('plain words\n');
    }
    response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * One account with every module and everything a path can name. Each operation gets its own
 * world, so that what one operation changes (a revoked key, a replaced entity, a rate limit
 * turned down) cannot decide another operation's answers.
 */
export interface World {
  accountId: string;
  apiKey: string;
  recordToken: string;
  sourceToken: string;
  recordId: string;
  recordEmail: string;
  documentId: string;
  /** A key and a source that operations may revoke or change without harming the world. */
  spareKeyId: string;
  spareSourceId: string;
  userId: string;
  /** A new session of the world's user (its owner): the cookie's value and the CSRF token. */
  session(): Promise<{ cookie: string; csrf: string }>;
  /** Field keys of the account's entities: the data rules 422 may name (see the test's header). */
  fieldKeys: Set<string>;
  hints: GenerationHints;
  /** Resource ids by the path segment before a `{param}`. */
  ids: Record<string, string>;
}

async function expectStatus(
  response: { statusCode: number; body: string; json(): any },
  status: number,
  what: string,
): Promise<any> {
  if (response.statusCode !== status)
    throw new Error(`world setup, ${what}: ${response.statusCode} ${response.body}`);
  return response.json();
}

export async function createWorld(t: TestApp, files: FileServer): Promise<World> {
  const account = await expectStatus(
    await t.request({
      method: 'POST',
      url: '/admin/v1/accounts',
      key: ADMIN_TOKEN,
      body: {
        name: 'Contract world',
        modules: ['crm', 'distribution', 'booking'],
        rate_limit_per_minute: 1_000_000,
      },
    }),
    201,
    'account',
  );
  const apiKey: string = account.api_key.key;
  const as = (method: 'POST' | 'GET', url: string, body?: object) =>
    t.request({ method, url, key: apiKey, body });
  await putEntity(t, { id: account.id, apiKey }, 'lead', WORLD_ENTITY);
  const source = await expectStatus(
    // Hundreds of generated posts come from one address: the per-address limit (60 a minute by
    // default) is not what the contract checks.
    await as('POST', '/api/v1/settings/sources', { name: 'Website', rate_limit_per_minute: 10_000 }),
    201,
    'source',
  );
  const spareSource = await expectStatus(
    await as('POST', '/api/v1/settings/sources', { name: 'Spare' }),
    201,
    'spare source',
  );
  const spareKey = await expectStatus(
    await as('POST', '/api/v1/settings/api-keys', { name: 'Spare' }),
    201,
    'spare key',
  );
  const user = await expectStatus(
    await as('POST', '/api/v1/settings/users', { email: 'agent@example.com', name: 'Agent' }),
    201,
    'user',
  );
  const recordEmail = 'world@example.com';
  const created = await expectStatus(
    await as('POST', '/api/v1/records', {
      entity: 'lead',
      fields: { first_name: 'World', email: recordEmail },
      documents: [{ url: `${files.base}/offer.pdf`, field: 'contract' }],
      crm: { stage: 'New' },
    }),
    201,
    'record',
  );
  const record = await expectStatus(await as('GET', `/api/v1/records/${created.id}`), 200, 'record read');
  const documentId: string | undefined = record.documents[0]?.id;
  if (!documentId) throw new Error(`world setup: the document was not attached: ${JSON.stringify(created)}`);
  const token = await expectStatus(
    await as('POST', `/api/v1/records/${created.id}/tokens`, {
      fields: ['first_name', 'message', 'contract'],
    }),
    201,
    'record token',
  );
  const webhook = await expectStatus(
    await as('POST', '/api/v1/settings/webhooks', { url: `${files.base}/hook`, events: ['*'] }),
    201,
    'webhook',
  );
  // The distribution module: a partner taking part in the lead distribution, and a return reason.
  const partner = await expectStatus(
    await as('POST', '/api/v1/distribution/partners', {
      name: 'World Partner',
      email: 'partner@example.com',
      street: 'Hauptstraße 1',
      postal_code: '10115',
      city: 'Berlin',
      country: 'DE',
    }),
    201,
    'partner',
  );
  await expectStatus(
    await t.request({ method: 'PUT', url: '/api/v1/settings/distributions/lead', key: apiKey, body: {} }),
    200,
    'distribution',
  );
  const participation = await expectStatus(
    await as('POST', '/api/v1/settings/distributions/lead/participations', {
      partner_id: partner.id,
      channel: 'webhook',
      address: `${files.base}/hook`,
      price_cents: 1500,
    }),
    201,
    'participation',
  );
  const returnReason = await expectStatus(
    await as('POST', '/api/v1/settings/return-reasons', { name: 'Wrong number' }),
    201,
    'return reason',
  );
  await expectStatus(
    await t.request({
      method: 'PUT',
      url: '/api/v1/settings/distributions/lead/rules',
      key: apiKey,
      body: [{ name: 'Everyone', strategy: 'all', participation_ids: [participation.id] }],
    }),
    200,
    'distribution rules',
  );
  // A distribution run of a record of its own (the world's record stays undistributed), and its delivery.
  const distributed = await expectStatus(
    await as('POST', '/api/v1/records', { entity: 'lead', fields: { email: 'distributed@example.com' } }),
    201,
    'record to distribute',
  );
  const run = await expectStatus(
    await as('POST', '/api/v1/distribution/distributions', { record_id: distributed.id }),
    200,
    'distribution run',
  );
  const deliveries = await t.request({
    method: 'GET',
    url: `/api/v1/distribution/deliveries?partner_id=${partner.id}`,
    key: apiKey,
  });
  const delivery = deliveries.json().deliveries[0];
  if (!delivery) throw new Error(`world: the run made no delivery: ${JSON.stringify(run)}`);
  const urls = [
    `${files.base}/hook`,
    `${files.base}/offer.pdf`,
    `${files.base}/notes.txt`,
    `${files.base}/missing.pdf`,
  ];
  return {
    accountId: account.id,
    apiKey,
    recordToken: token.token,
    sourceToken: source.token,
    recordId: created.id,
    recordEmail,
    documentId,
    spareKeyId: spareKey.id,
    spareSourceId: spareSource.id,
    userId: user.id,
    async session() {
      const token = await t.services.sessions.issueLink(account.id, user.id, 60_000);
      const started = await t.services.sessions.signInWithToken(token, 'contract-world');
      return { cookie: started.token, csrf: started.view.csrf_token };
    },
    fieldKeys: new Set(WORLD_ENTITY.fields.map((field) => field.key)),
    ids: {
      accounts: account.id,
      'api-keys': spareKey.id,
      sources: spareSource.id,
      users: user.id,
      records: created.id,
      leads: created.id,
      documents: documentId,
      webhooks: webhook.id,
      entities: 'lead',
      partners: partner.id,
      participations: participation.id,
      'return-reasons': returnReason.id,
      'distributions:entity_key': 'lead',
      'distributions:id': run.run_id,
      deliveries: delivery.id,
    },
    hints: {
      values: {
        entity: ['lead'],
        lead_object: ['lead'],
        record: [created.id],
        record_id: [created.id],
        email: [recordEmail, 'ada@example.com'],
        stage: ['New', 'Contacted', 'Won'],
        pipeline: ['Sales'],
        field: ['contract', 'attachments'],
        assignee: [user.id, 'agent@example.com'],
        viewers: [[user.id], 'agent@example.com', ['agent@example.com', user.id]],
        fields: [['first_name', 'message'], { first_name: 'Ada', budget: 1200 }],
        modules: [['crm', 'distribution', 'booking']],
        rate_limit_per_minute: [1_000_000],
        updated_since: ['2020-01-01T00:00:00Z'],
        format: [null],
        role: [null],
        events: [['*'], ['record.created', 'note.added']],
        partner_id: [partner.id],
        participation_ids: [[participation.id]],
        address: [`${files.base}/hook`, 'partner@example.com'],
        country: ['DE', 'Germany', 'österreich', ''],
        billing_country: ['AT', 'Schweiz', null],
        billingCountry: ['FR'],
        currency: ['EUR'],
        time_zone: ['Europe/Berlin', 'UTC'],
        from: ['08:00'],
        to: ['18:00'],
      },
      freeForm: { ...FIELD_VALUES, entity: ['lead'] },
      urls,
    },
  };
}

/** Tables whose rows record requests rather than data: refused requests may leave rows there. */
const LOG_TABLES = new Set(['intake_log', 'idempotency_keys', 'schema_migrations', 'instance_settings']);

/**
 * A digest of every row the world's account owns (and of the account list), to see that a
 * refused request wrote nothing. One statement over every table of the schema, found once, and
 * prepared (`PREPARED`): parsing and planning its 38 subqueries took longer than reading the rows
 * (1,582 digests a run: 4.4 s unprepared, 2.0 s prepared).
 */
export async function stateDigester(t: TestApp): Promise<(accountId: string) => Promise<string>> {
  const tables = await sql<{ table_name: string; scoped: boolean }>`
    SELECT table_name, bool_or(column_name = 'account_id') AS scoped
    FROM information_schema.columns
    WHERE table_schema = 'public'
    GROUP BY table_name
    ORDER BY table_name`.execute(t.db);
  const digested = tables.rows.filter(
    ({ table_name: table, scoped }) => !LOG_TABLES.has(table) && (scoped || table === 'accounts'),
  );
  return async (accountId) => {
    const parts = digested.map(({ table_name: table, scoped }) => {
      const filter = scoped ? sql`WHERE x.account_id = ${accountId}` : sql``;
      return sql`(SELECT ${sql.lit(`${table}:`)} || coalesce(md5(string_agg(x::text, '|' ORDER BY x::text)), '-') FROM ${sql.table(table)} x ${filter})`;
    });
    const result = await sql<{
      digest: string;
    }>`SELECT concat_ws(' ', ${sql.join(parts)}) AS digest ${PREPARED}`.execute(t.db);
    return result.rows[0]?.digest ?? '';
  };
}

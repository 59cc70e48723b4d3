import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isS1Path } from '../../src/http/error-handler.ts';
import { ERROR_CODES } from '../../src/http/errors.ts';
import { ADMIN_TOKEN, type Request, startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import {
  formBody,
  formEncode,
  hostileKey,
  hostileObject,
  hostileText,
  hostileValue,
  MULTIPART_TYPE,
  multipartEncode,
  percentEncode,
  rawEscape,
  toJsonBody,
} from '../helpers/hostile.ts';

/**
 * Property: whatever a client sends — full Unicode with NUL and lone surrogates, over-long text,
 * numbers JSON cannot hold, raw bytes, odd form and query keys, odd path segments — to any
 * endpoint that takes a body, a query or a path parameter, the answer is never a 5xx, and a
 * refusal carries a code of the closed list in the body of its surface.
 * Seeded so a failure repeats; FUZZ_SEED and FUZZ_RUNS explore further.
 */
const seed = Number(process.env.FUZZ_SEED ?? 20_240_611);
const runs = Number(process.env.FUZZ_RUNS ?? 20);
const settings = { numRuns: runs, seed, endOnFailure: true };

const metaKey = fc.oneof(
  fc.constantFrom(
    'source',
    'external_id',
    'idempotency_key',
    'utm_source',
    'utm_medium',
    'gclid',
    'referrer',
  ),
  hostileKey,
);
const documentItem = fc.record(
  {
    url: fc.oneof(
      hostileText(),
      hostileText(10).map((tail) => `http://127.0.0.1:9/${percentEncode(tail)}`),
    ),
    name: hostileText(),
    field: fc.oneof(fc.constantFrom('attachments', 'email'), hostileText(10)),
  },
  { requiredKeys: ['url'] },
);
/** A body shaped like POST /api/v1/records, every part of it hostile or missing. */
const recordBody = fc.record(
  {
    entity: fc.oneof(fc.constant('lead'), fc.constant('lead'), hostileText(10)),
    fields: fc.oneof(
      fc
        .record({ email: fc.oneof(fc.constant('fuzz@b.co'), hostileText()) })
        .chain((base) => hostileObject(8).map((more) => ({ ...base, ...more }))),
      hostileValue,
    ),
    meta: fc.oneof(fc.dictionary(metaKey, hostileValue, { maxKeys: 4 }), hostileValue),
    crm: fc.oneof(
      fc.record({ stage: hostileText(), pipeline: hostileText() }, { requiredKeys: [] }),
      hostileValue,
    ),
    note: hostileValue,
    documents: fc.array(documentItem, { maxLength: 2 }),
  },
  { requiredKeys: [] },
);
const anyBody = fc.oneof({ arbitrary: recordBody, weight: 3 }, { arbitrary: hostileValue, weight: 1 });
const entityBody = fc.record(
  {
    name: hostileText(),
    fields: fc.array(
      fc.record(
        {
          key: fc.oneof(fc.constantFrom('email', 'first_name', 'x'), hostileText(10)),
          label: hostileText(),
          type: fc.oneof(fc.constantFrom('text', 'select', 'number', 'date', 'files'), hostileText(8)),
          options: fc.array(hostileText(), { maxLength: 3 }),
          role: fc.oneof(fc.constantFrom('email', 'first_name'), hostileText(8), fc.constant(null)),
          format: fc.oneof(fc.constant(null), hostileText(8)),
          required: fc.boolean(),
        },
        { requiredKeys: ['key', 'label', 'type'] },
      ),
      { maxLength: 3 },
    ),
    duplicate_rule: fc.oneof(
      fc.constant(null),
      fc.record({ match: fc.array(hostileText(10), { minLength: 1, maxLength: 2 }), action: hostileText(8) }),
    ),
    pipelines: fc.array(
      fc.record({ name: hostileText(), stages: fc.array(hostileText(), { minLength: 1, maxLength: 3 }) }),
      { maxLength: 2 },
    ),
  },
  { requiredKeys: ['name', 'fields'] },
);
/**
 * A path segment: hostile text as a careless client encodes it, or raw escapes, or a uuid; never
 * empty (an empty segment addresses the collection, which the contract check cannot tell).
 */
const pathSegment = fc
  .oneof(
    hostileText(40).map(percentEncode),
    fc
      .tuple(hostileText(5), rawEscape, hostileText(5))
      .map(([a, raw, b]) => percentEncode(a) + raw + percentEncode(b)),
    fc.uuid(),
  )
  .filter((segment) => segment !== '');
const queryKey = fc.oneof(
  fc.constantFrom('q', 'cursor', 'entity', 'updated_since', 'limit', 'exp', 'sig'),
  hostileKey,
);
const queryString = fc.oneof(
  fc
    .dictionary(queryKey, fc.oneof(hostileText(), fc.array(hostileText(), { maxLength: 2 })), { maxKeys: 4 })
    .map(formEncode),
  fc.tuple(queryKey, rawEscape).map(([key, raw]) => `${percentEncode(key)}=${raw}`),
);

describe.each(TEST_DATABASES)('hostile input never causes a 5xx, on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  let other: TestAccount;
  let recordId: string;
  let recordToken: string;
  let sourceToken: string;
  let spareKeyId: string;

  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t, {
      modules: ['crm'],
      duplicateRule: { match: ['email'], action: 'update' },
    });
    other = await t.createAccount({ name: 'Other' });
    // The properties send hundreds of requests a minute: the rate limit is not what they test.
    const raised = await t.request({
      method: 'PATCH',
      url: `/admin/v1/accounts/${account.id}`,
      key: ADMIN_TOKEN,
      body: { rate_limit_per_minute: 1_000_000 },
    });
    expect(raised.statusCode).toBe(200);
    const post = async (url: string, body: object) =>
      (await t.request({ method: 'POST', url, key: account.apiKey, body })).json();
    recordId = (
      await post('/api/v1/records', { entity: 'lead', fields: { email: 'fuzz@b.co', first_name: 'Fuzz' } })
    ).id;
    recordToken = (
      await post(`/api/v1/records/${recordId}/tokens`, { fields: ['first_name', 'budget', 'topics'] })
    ).token;
    sourceToken = (await post('/api/v1/settings/sources', { name: 'Fuzz', rate_limit_per_minute: 10_000 }))
      .token;
    spareKeyId = (await post('/api/v1/settings/api-keys', { name: 'Spare' })).id;
  });
  afterAll(async () => t?.close());

  async function send(request: Request) {
    const response = await t.request(request);
    const label = `${request.method} ${request.url}`;
    expect(response.statusCode, `${label}: ${response.body.slice(0, 300)}`).toBeLessThan(500);
    if (response.statusCode >= 400) {
      const body = JSON.parse(response.body);
      if (isS1Path(request.url)) expect(body.status, label).toBe('error');
      else expect(ERROR_CODES, label).toContain(body.error);
    }
    return response;
  }
  /** `key` null sends no Authorization header (source-token addresses). */
  const json = (
    method: Request['method'],
    url: string,
    value: unknown,
    key: string | null = account.apiKey,
  ) =>
    send({
      method,
      url,
      key: key ?? undefined,
      headers: { 'content-type': 'application/json' },
      payload: toJsonBody(value),
    });
  const form = (url: string, values: Record<string, unknown>, key: string | null = account.apiKey) =>
    send({
      method: 'POST',
      url,
      key: key ?? undefined,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: formEncode(values),
    });

  it('S2 intake, source-token intake, PATCH in both forms, notes and record tokens', async () => {
    await fc.assert(
      fc.asyncProperty(anyBody, recordBody, hostileObject(4), async (body, patch, note) => {
        await json('POST', '/api/v1/records', body);
        await json('POST', `/api/v1/in/${sourceToken}`, body, null);
        await json('PATCH', `/api/v1/records/${recordId}`, patch);
        await json('PATCH', '/api/v1/records', patch, recordToken);
        await json('POST', '/api/v1/notes', { body: 'x', record: recordId, ...note });
        await json('POST', '/api/v1/notes', note);
        await json('POST', `/api/v1/records/${recordId}/tokens`, { fields: Object.keys(note), ...note });
      }),
      settings,
    );
  });

  it('form-encoded and multipart intake on S1 and on a source token, bracketed keys included', async () => {
    await fc.assert(
      fc.asyncProperty(formBody, async (values) => {
        await form('/api/intake', { entity: 'lead', ...values });
        await form(`/api/v1/in/${sourceToken}`, { entity: 'lead', ...values }, null);
        await send({
          method: 'POST',
          url: `/api/v1/in/${sourceToken}`,
          headers: { 'content-type': MULTIPART_TYPE },
          payload: multipartEncode({ entity: 'lead', ...values }),
        });
        await form('/api/v1/records', values);
      }),
      settings,
    );
  });

  it('S1 intake, lead PATCH and status, and both bulk calls', async () => {
    await fc.assert(
      fc.asyncProperty(
        hostileObject(8),
        fc.array(anyBody, { minLength: 1, maxLength: 4 }),
        fc.array(hostileObject(4), { minLength: 1, maxLength: 4 }),
        hostileValue,
        async (flat, records, batch, other) => {
          await json('POST', '/api/intake', { entity: 'lead', email: 'fuzz@b.co', ...flat });
          await json('POST', '/api/intake', other);
          await json('PATCH', `/api/leads/${recordId}`, { fields: flat, note: other });
          await json('PATCH', `/api/leads/${recordId}/status`, { status_step: other });
          await json('POST', '/api/v1/records/bulk', { records });
          await json('POST', '/api/v1/records/bulk', { records: [...records, other] });
          await json('POST', '/api/leads/bulk', { entity: 'lead', batch, source: other, note: other });
        },
      ),
      settings,
    );
  });

  it('the settings API: api keys, sources, users and entities', async () => {
    await fc.assert(
      fc.asyncProperty(hostileObject(4), entityBody, pathSegment, async (values, entity, segment) => {
        await json('POST', '/api/v1/settings/api-keys', { name: 'k', ...values });
        await json('PATCH', `/api/v1/settings/api-keys/${spareKeyId}`, values);
        await json('POST', '/api/v1/settings/sources', { name: 's', ...values });
        await json('POST', '/api/v1/settings/users', { email: 'u@b.co', name: 'u', ...values });
        await json('PUT', '/api/v1/settings/entities/fuzz', entity);
        await json('PUT', `/api/v1/settings/entities/${segment}`, entity);
      }),
      settings,
    );
  });

  it('the operator API: accounts created and changed', async () => {
    await fc.assert(
      fc.asyncProperty(hostileObject(4), hostileText(), async (values, name) => {
        await json('POST', '/admin/v1/accounts', { name, ...values }, ADMIN_TOKEN);
        await json('POST', '/admin/v1/accounts', values, ADMIN_TOKEN);
        await json('PATCH', `/admin/v1/accounts/${other.id}`, { name, ...values }, ADMIN_TOKEN);
      }),
      settings,
    );
  });

  it('query strings of every list and of document addresses', async () => {
    await fc.assert(
      fc.asyncProperty(queryString, async (query) => {
        for (const path of [
          '/api/v1/records',
          '/api/v1/intake-log',
          '/api/v1/settings/api-keys',
          '/api/v1/settings/sources',
          '/api/v1/settings/users',
          '/api/v1/entities',
          `/api/v1/documents/${recordId}`,
        ]) {
          await send({ method: 'GET', url: `${path}?${query}`, key: account.apiKey });
        }
        await send({ method: 'GET', url: `/admin/v1/accounts?${query}`, key: ADMIN_TOKEN });
      }),
      settings,
    );
  });

  it('path parameters of every route that has one', async () => {
    await fc.assert(
      fc.asyncProperty(pathSegment, async (segment) => {
        const key = account.apiKey;
        await send({ method: 'GET', url: `/api/v1/records/${segment}`, key });
        await send({ method: 'GET', url: `/api/leads/${segment}`, key });
        await send({ method: 'GET', url: `/api/v1/documents/${segment}`, key });
        await send({ method: 'POST', url: `/api/v1/documents/${segment}/signed-url`, key });
        await send({ method: 'POST', url: `/api/v1/settings/sources/${segment}/token`, key });
        await send({ method: 'DELETE', url: `/api/v1/settings/api-keys/${segment}`, key });
        await json('PATCH', `/api/v1/records/${segment}`, { fields: { first_name: 'x' } });
        await json('PATCH', `/api/leads/${segment}`, { fields: { first_name: 'x' } });
        await json('POST', `/api/v1/in/${segment}`, { entity: 'lead', fields: { email: 'p@b.co' } }, null);
        await send({ method: 'GET', url: `/admin/v1/accounts/${segment}`, key: ADMIN_TOKEN });
      }),
      settings,
    );
  });
});

import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/http/errors.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

/** Field names worth trying beside random ones: real fields, labels, hostile keys. */
const interestingKeys = fc.constantFrom(
  'email',
  'E-Mail Address',
  'first_name',
  'budget',
  'interest',
  'topics',
  'consent',
  'birthday',
  'callback_at',
  '__proto__',
  'constructor',
  'toString',
  'entity',
  'meta',
  'crm',
  'documents',
);
const anyKey = fc.oneof(interestingKeys, fc.string({ maxLength: 20 }));
const leafValue = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.integer(),
  fc.double({ noNaN: false }),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom('Solar', 'yes', '2024-02-30', '2024-02-29', 'a@b.co', '', ' '),
);
const value = fc.letrec((tie) => ({
  tree: fc.oneof({ depthSize: 'small' }, leafValue, tie('array'), tie('object')),
  array: fc.array(tie('tree'), { maxLength: 4 }),
  object: fc.dictionary(anyKey, tie('tree'), { maxKeys: 4 }),
})).tree;
const body = fc.oneof(
  fc.record(
    {
      entity: fc.oneof(fc.constant('lead'), fc.string({ maxLength: 10 }), fc.integer()),
      fields: fc.oneof(fc.dictionary(anyKey, value, { maxKeys: 8 }), value),
      meta: fc.oneof(fc.dictionary(anyKey, value, { maxKeys: 4 }), value),
      crm: value,
      note: value,
    },
    { requiredKeys: [] },
  ),
  value,
);

describe.each(TEST_DATABASES)('fuzzing on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  let recordId: string;

  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t, {
      modules: ['crm'],
      duplicateRule: { match: ['email'], action: 'update' },
    });
    const created = await t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: account.apiKey,
      body: { entity: 'lead', fields: { email: 'fuzz@b.co' } },
    });
    recordId = created.json().id;
  });
  afterAll(async () => t?.close());

  /** Every answer is below 500 and, when refused, names a code of the closed list. */
  function expectSane(response: { statusCode: number; body: string; headers: Record<string, unknown> }) {
    expect(response.statusCode, response.body).toBeLessThan(500);
    if (response.statusCode >= 400 && String(response.headers['content-type']).includes('json')) {
      const parsed = JSON.parse(response.body);
      if (parsed.status !== 'error') expect(ERROR_CODES).toContain(parsed.error);
    }
  }

  const runs = Number(process.env.FUZZ_RUNS ?? 60);

  it('intake bodies never cause a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(body, async (candidate) => {
        expectSane(
          await t.request({ method: 'POST', url: '/api/v1/records', key: account.apiKey, body: candidate }),
        );
      }),
      { numRuns: runs },
    );
  });

  it('S1 intake, notes and patch bodies never cause a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.dictionary(anyKey, value, { maxKeys: 8 }), value, async (flat, other) => {
        expectSane(
          await t.request({
            method: 'POST',
            url: '/api/intake',
            key: account.apiKey,
            body: { entity: 'lead', ...flat },
          }),
        );
        expectSane(
          await t.request({ method: 'POST', url: '/api/v1/notes', key: account.apiKey, body: other }),
        );
        expectSane(
          await t.request({
            method: 'POST',
            url: '/api/v1/notes',
            key: account.apiKey,
            body: { body: 'x', ...flat },
          }),
        );
        expectSane(
          await t.request({
            method: 'PATCH',
            url: `/api/v1/records/${recordId}`,
            key: account.apiKey,
            body: { fields: flat },
          }),
        );
        expectSane(
          await t.request({
            method: 'PATCH',
            url: `/api/v1/records/${recordId}`,
            key: account.apiKey,
            body: other,
          }),
        );
      }),
      { numRuns: Math.ceil(runs / 2) },
    );
  });

  it('path ids never cause a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.string({ maxLength: 60 }), fc.uuid()), async (id) => {
        const path = encodeURIComponent(id);
        for (const url of [`/api/v1/records/${path}`, `/api/leads/${path}`, `/api/v1/documents/${path}`]) {
          expectSane(await t.request({ method: 'GET', url, key: account.apiKey }));
        }
      }),
      { numRuns: runs },
    );
  });
});

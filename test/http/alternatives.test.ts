import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detailsFromValidation } from '../../src/http/error-handler.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { oneDatabase } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

const DATE_OR_DATE_TIME =
  'must be a date (YYYY-MM-DD) or a date-time with an offset (2027-01-04T08:00:00Z or +01:00)';
const DATE_TIME = 'must be a date-time with an offset (2027-01-04T08:00:00Z or +01:00)';

/** Ajv's errors of `from` against anyOf [date (at most 10), date-time (at most 64)]. */
function anyOfErrors(...branches: { keyword: string; params: Record<string, unknown>; message?: string }[]) {
  return [
    ...branches.map((branch, index) => ({
      instancePath: '/from',
      schemaPath: `#/properties/from/anyOf/${index}/${branch.keyword}`,
      keyword: branch.keyword,
      params: branch.params,
      message: branch.message ?? 'ajv',
    })),
    {
      instancePath: '/from',
      schemaPath: '#/properties/from/anyOf',
      keyword: 'anyOf',
      params: {},
      message: 'must match a schema in anyOf',
    },
  ];
}

describe('a failed alternative of text names what is taken', () => {
  it('names both formats when the text fits neither', () => {
    expect(
      detailsFromValidation(
        anyOfErrors(
          { keyword: 'format', params: { format: 'date' } },
          { keyword: 'format', params: { format: 'date-time' } },
        ),
      ),
    ).toEqual([{ key: 'from', reason: 'invalid_format', message: DATE_OR_DATE_TIME }]);
  });

  it('takes the branch that got furthest: a format failure over a length', () => {
    expect(
      detailsFromValidation(
        anyOfErrors(
          { keyword: 'maxLength', params: { limit: 10 } },
          { keyword: 'format', params: { format: 'date-time' } },
        ),
      ),
    ).toEqual([{ key: 'from', reason: 'invalid_format', message: DATE_TIME }]);
  });

  it('names the most lenient length when the text is longer than every branch takes', () => {
    const [detail] = detailsFromValidation(
      anyOfErrors(
        { keyword: 'maxLength', params: { limit: 10 }, message: 'must NOT have more than 10 characters' },
        { keyword: 'maxLength', params: { limit: 64 }, message: 'must NOT have more than 64 characters' },
      ),
    );
    expect(detail).toMatchObject({ key: 'from', reason: 'out_of_range' });
    expect(detail!.message).toContain('64');
  });

  it('leaves other alternatives as they were', () => {
    // Different JSON types: invalid_type, as before.
    expect(
      detailsFromValidation(
        anyOfErrors(
          { keyword: 'type', params: { type: 'string' } },
          { keyword: 'type', params: { type: 'null' } },
        ),
      ),
    ).toEqual([{ key: 'from', reason: 'invalid_type', message: 'must be string or null' }]);
    // A branch failing on something other than the text's form: the anyOf itself.
    expect(
      detailsFromValidation(
        anyOfErrors({ keyword: 'format', params: { format: 'date' } }, { keyword: 'enum', params: {} }),
      ),
    ).toEqual([{ key: 'from', reason: 'not_allowed', message: 'must match a schema in anyOf' }]);
  });
});

describe.each(oneDatabase('pglite'))('time filters read as a date or a date-time on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t);
  });
  afterAll(async () => t?.close());

  it('answers an unreadable bound with invalid_format saying what is taken (records list, intake log)', async () => {
    for (const [url, key] of [
      ['/api/v1/records?created_from=garbage', 'created_from'],
      ['/api/v1/records?created_to=2024-13-01', 'created_to'],
      ['/api/v1/intake-log?created_from=yesterday', 'created_from'],
    ]) {
      const response = await t.request({ method: 'GET', url: url!, key: account.apiKey });
      expect(response.statusCode, url).toBe(422);
      expect(response.json().details, url).toEqual([
        { key, reason: 'invalid_format', message: DATE_OR_DATE_TIME },
      ]);
    }
    const local = await t.request({
      method: 'GET',
      url: '/api/v1/records?created_from=2027-01-04T08:00:00',
      key: account.apiKey,
    });
    expect(local.statusCode).toBe(422);
    expect(local.json().details).toEqual([
      { key: 'created_from', reason: 'invalid_format', message: DATE_TIME },
    ]);
  });

  it('says what a plain date-time filter takes', async () => {
    const response = await t.request({
      method: 'GET',
      url: '/api/v1/records?updated_since=2024-03-03T00:00:00',
      key: account.apiKey,
    });
    expect(response.statusCode).toBe(422);
    expect(response.json().details).toEqual([
      { key: 'updated_since', reason: 'invalid_format', message: DATE_TIME },
    ]);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

describe.each(TEST_DATABASES)('intake log filters on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  let single: string;
  let bulkRecord: string;
  let sourceToken: string;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t);
    const created = await t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: account.apiKey,
      headers: { 'x-request-id': 'req-filter-single' },
      body: { entity: 'lead', fields: { email: 'one@filter.co', shoe: 'x' } },
    });
    expect(created.statusCode).toBe(201);
    single = created.json().id;
    const refused = await t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: account.apiKey,
      body: { entity: 'lead', fields: { interest: 'Wind' } },
    });
    expect(refused.statusCode).toBe(422);
    const bulk = await t.request({
      method: 'POST',
      url: '/api/v1/records/bulk',
      key: account.apiKey,
      body: { records: [{ entity: 'lead', fields: { email: 'two@filter.co' } }] },
    });
    bulkRecord = bulk.json().results[0].id;
    const source = await t.request({
      method: 'POST',
      url: '/api/v1/settings/sources',
      key: account.apiKey,
      body: { name: 'Website' },
    });
    sourceToken = source.json().token;
    const viaForm = await t.request({
      method: 'POST',
      url: `/api/v1/in/${sourceToken}`,
      body: { entity: 'lead', fields: { email: 'three@filter.co' } },
    });
    expect(viaForm.statusCode).toBe(201);
  });
  afterAll(async () => t?.close());

  const log = (query: string, key = account.apiKey) =>
    t.request({ method: 'GET', url: `/api/v1/intake-log${query}`, key });
  const entries = async (query: string) => {
    const response = await log(query);
    expect(response.statusCode, response.body).toBe(200);
    return response.json().entries as any[];
  };

  describe('happy path', () => {
    it('filters by outcome, endpoint, source, entity and request id', async () => {
      expect((await entries('')).length).toBe(4);
      expect((await entries('?outcome=refused')).map((e) => e.error)).toEqual(['validation_failed']);
      expect((await entries('?outcome=bulk')).map((e) => e.endpoint)).toEqual(['records.bulk']);
      expect((await entries('?endpoint=in')).map((e) => e.source)).toEqual(['Website']);
      expect((await entries('?source=Website')).length).toBe(1);
      expect((await entries('?entity=lead')).length).toBe(4);
      expect((await entries('?entity=other')).length).toBe(0);
      const byRequest = await entries('?request_id=req-filter-single');
      expect(byRequest.map((e) => e.record_id)).toEqual([single]);
      expect(byRequest[0].warnings).toEqual([{ key: 'shoe', reason: 'unmapped' }]);
      expect((await entries('?outcome=created&endpoint=records')).map((e) => e.record_id)).toEqual([single]);
    });

    it('finds a record’s entries, also the bulk call that names it in its items', async () => {
      expect((await entries(`?record_id=${single}`)).map((e) => e.outcome)).toEqual(['created']);
      const bulk = await entries(`?record_id=${bulkRecord}`);
      expect(bulk.map((e) => e.outcome)).toEqual(['bulk']);
      expect(bulk[0].items[0]).toMatchObject({ status: 'created', record_id: bulkRecord });
    });

    it('filters by time, a date meaning its whole day (UTC), and pages inside a filter', async () => {
      const today = new Date().toISOString().slice(0, 10);
      expect((await entries(`?created_from=${today}&created_to=${today}`)).length).toBe(4);
      expect((await entries('?created_to=2000-01-01')).length).toBe(0);
      const future = new Date(Date.now() + 3_600_000).toISOString();
      expect((await entries(`?created_from=${encodeURIComponent(future)}`)).length).toBe(0);
      // An offset's + sent unescaped (decoded as a space) is read as the +.
      const futureWithOffset = future.replace('Z', '+00:00');
      expect((await entries(`?created_from=${futureWithOffset}`)).length).toBe(0);
      expect((await entries(`?created_to=${futureWithOffset}`)).length).toBe(4);
      const first = await log('?entity=lead&limit=3');
      expect(first.json().entries.length).toBe(3);
      const cursor = first.json().next_cursor;
      expect(cursor).toBeTruthy();
      const second = await entries(`?entity=lead&limit=3&cursor=${cursor}`);
      expect(second.length).toBe(1);
      const ids = [...first.json().entries, ...second].map((e) => e.id);
      expect(new Set(ids).size).toBe(4);
    });
  });

  describe('errors', () => {
    it('answers 422 to an unknown outcome, a malformed record id or date', async () => {
      for (const query of [
        '?outcome=lost',
        '?endpoint=nowhere',
        '?record_id=42',
        '?created_from=yesterday',
        '?created_to=2026-13-45',
        '?source=',
      ]) {
        const response = await log(query);
        expect(response.statusCode, query).toBe(422);
        expect(response.json().error, query).toBe('validation_failed');
      }
    });
  });

  describe('security', () => {
    it('shows another account nothing of these entries, whatever the filter', async () => {
      const other = await t.createAccount();
      for (const query of ['', `?record_id=${single}`, '?source=Website', '?request_id=req-filter-single']) {
        const response = await log(query, other.apiKey);
        expect(response.statusCode).toBe(200);
        expect(response.json().entries).toEqual([]);
      }
    });

    it('needs a key with records:read, and a key at all', async () => {
      const created = await t.request({
        method: 'POST',
        url: '/api/v1/settings/api-keys',
        key: account.apiKey,
        body: { name: 'writer', permissions: ['records:write'] },
      });
      expect((await log('?outcome=created', created.json().key)).statusCode).toBe(403);
      expect((await t.request({ method: 'GET', url: '/api/v1/intake-log?outcome=created' })).statusCode).toBe(
        401,
      );
      expect((await log('', sourceToken)).statusCode).toBe(401);
    });
  });
});

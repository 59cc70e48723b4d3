import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, historyOf } from '../helpers/fixtures.ts';

describe.each(TEST_DATABASES)('S2 bulk written together on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind);
  });
  afterAll(async () => t?.close());

  it('keeps every rule when entries go in together: duplicates inside one call, existing records, idempotency keys, notes', async () => {
    const account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
    const existing = (
      await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: { entity: 'lead', fields: { email: 'old@b.co' } },
      })
    ).json().id;
    const response = await t.request({
      method: 'POST',
      url: '/api/v1/records/bulk',
      key: account.apiKey,
      headers: { 'x-request-id': 'bulk-batch-1' },
      body: {
        records: [
          { entity: 'lead', fields: { email: 'same@b.co', first_name: 'One' }, note: 'first' },
          { entity: 'lead', fields: { email: 'SAME@b.co', last_name: 'Two' } },
          { entity: 'lead', fields: { email: 'old@b.co', first_name: 'Again' } },
          { entity: 'lead', fields: { email: 'keyed@b.co' }, meta: { idempotency_key: 'bulk-entry-1' } },
          { entity: 'lead', fields: { email: 'fresh@b.co' }, meta: { external_id: 'ext-9' } },
        ],
      },
    });
    expect(response.statusCode).toBe(200);
    const { results, accepted } = response.json();
    expect(accepted).toBe(5);
    expect(results[0]).toMatchObject({ created: true, updated: false });
    expect(results[1]).toMatchObject({ id: results[0].id, created: false, updated: true });
    expect(results[2]).toMatchObject({ id: existing, created: false, updated: true });
    expect(results[3]).toMatchObject({ created: true });
    expect(results[4]).toMatchObject({ created: true });

    const same = await t.request({
      method: 'GET',
      url: `/api/v1/records/${results[0].id}`,
      key: account.apiKey,
    });
    // Non-empty incoming values overwrite: the second spelling of the address is kept.
    expect(same.json().fields).toMatchObject({ email: 'SAME@b.co', first_name: 'One', last_name: 'Two' });
    expect(same.json().crm).toEqual({ pipeline: 'Sales', stage: 'New', entered_at: expect.any(String) });
    const fresh = await t.request({
      method: 'GET',
      url: `/api/v1/records/${results[4].id}`,
      key: account.apiKey,
    });
    expect(fresh.json().external_id).toBe('ext-9');
    const notes = await t.db
      .selectFrom('notes')
      .select('body')
      .where('record_id', '=', results[0].id)
      .execute();
    expect(notes).toEqual([{ body: 'first' }]);
    expect(await historyOf(t, account.apiKey, results[0].id)).toEqual([
      'lead_updated',
      'note_added',
      'lead_created',
    ]);
    // One log entry for the call, whichever way each entry went in (decisions §10).
    const log = await t.db
      .selectFrom('intake_log')
      .select(['outcome', 'items'])
      .where('request_id', '=', 'bulk-batch-1')
      .execute();
    expect(log).toEqual([
      {
        outcome: 'bulk',
        items: [
          { index: 0, status: 'created', record_id: results[0].id },
          { index: 1, status: 'updated', record_id: results[0].id },
          { index: 2, status: 'updated', record_id: existing },
          { index: 3, status: 'created', record_id: results[3].id },
          { index: 4, status: 'created', record_id: results[4].id },
        ],
      },
    ]);

    // The keyed entry is idempotent on its own: sent again alone, it answers the same record.
    const again = await t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: account.apiKey,
      body: { entity: 'lead', fields: { email: 'keyed@b.co' }, meta: { idempotency_key: 'bulk-entry-1' } },
    });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json().id).toBe(results[3].id);
  });
});

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, historyOf, LEAD_ENTITY, putEntity } from '../helpers/fixtures.ts';

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

  it('keys duplicates by the rule’s own fields when entries go in together, not by their email', async () => {
    const account = await accountWithLeads(t, { duplicateRule: { match: ['phone'], action: 'update' } });
    const response = await t.request({
      method: 'POST',
      url: '/api/v1/records/bulk',
      key: account.apiKey,
      body: {
        records: [
          { entity: 'lead', fields: { email: 'a@b.co', phone: '+49 30 111111' } },
          { entity: 'lead', fields: { email: 'b@b.co', phone: '+49 30 111111', first_name: 'Bea' } },
          // No phone: no duplicate key, so the same email twice makes two records.
          { entity: 'lead', fields: { email: 'c@b.co' } },
          { entity: 'lead', fields: { email: 'c@b.co' } },
        ],
      },
    });
    expect(response.statusCode).toBe(200);
    const { results } = response.json();
    expect(results[0]).toMatchObject({ created: true });
    expect(results[1]).toMatchObject({ id: results[0].id, created: false, updated: true });
    expect(results[2]).toMatchObject({ created: true });
    expect(results[3]).toMatchObject({ created: true });
    expect(results[3].id).not.toBe(results[2].id);
    const keys = await sql<{ id: string; dedupe_key: string | null; email_lc: string | null }>`
      SELECT id, dedupe_key, email_lc FROM records WHERE account_id = ${account.id}::uuid`.execute(t.db);
    const byId = new Map(keys.rows.map((row) => [row.id, row]));
    expect(byId.size).toBe(3);
    expect(byId.get(results[0].id)).toMatchObject({ dedupe_key: '+49 30 111111', email_lc: 'b@b.co' });
    expect(byId.get(results[2].id)).toMatchObject({ dedupe_key: null, email_lc: 'c@b.co' });
  });

  it('writes the call’s one log entry with its records when the batch answers every entry, refusals listed in place', async () => {
    const account = await accountWithLeads(t);
    const response = await t.request({
      method: 'POST',
      url: '/api/v1/records/bulk',
      key: account.apiKey,
      headers: { 'x-request-id': 'bulk-batch-2' },
      body: {
        records: [
          { entity: 'lead', fields: { email: 'a@b.co', first_name: 'Ann' } },
          { entity: 'nothing', fields: { email: 'x@b.co' } },
          { entity: 'lead', fields: { email: 'c@b.co', budget: 'lots' } },
          {
            entity: 'lead',
            fields: { email: 'd@b.co', colour: 'red' },
            meta: { source: 'fair', utm_source: 'news' },
          },
        ],
      },
    });
    expect(response.statusCode).toBe(200);
    const { results, accepted, rejected } = response.json();
    expect({ accepted, rejected }).toEqual({ accepted: 2, rejected: 2 });
    expect(results[1]).toMatchObject({ error: 'unknown_entity' });
    expect(results[2]).toMatchObject({ error: 'validation_failed' });
    expect(results[3].warnings).toEqual([{ key: 'colour', reason: 'unmapped' }]);
    const log = await t.db
      .selectFrom('intake_log')
      .select(['outcome', 'status_code', 'entity_key', 'source', 'items'])
      .where('request_id', '=', 'bulk-batch-2')
      .execute();
    expect(log).toEqual([
      {
        outcome: 'bulk',
        status_code: 200,
        entity_key: null,
        source: 'api',
        items: [
          { index: 0, status: 'created', record_id: results[0].id },
          { index: 1, status: 'refused', error: 'unknown_entity' },
          { index: 2, status: 'refused', error: 'validation_failed', details: results[2].details },
          {
            index: 3,
            status: 'created',
            record_id: results[3].id,
            warnings: [{ key: 'colour', reason: 'unmapped' }],
          },
        ],
      },
    ]);
    // Values the entries share (entity, stage) and those they do not (source) land on each row.
    const rows = await t.db
      .selectFrom('records')
      .select(['id', 'source', 'origin', 'dedupe_unique', 'stage_id', 'entity_id'])
      .where('account_id', '=', account.id)
      .orderBy('email_lc')
      .execute();
    expect(rows.map((row) => [row.id, row.source, row.origin, row.dedupe_unique])).toEqual([
      [results[0].id, 'api', {}, false],
      [results[3].id, 'fair', { utm_source: 'news' }, false],
    ]);
    expect(rows[0]!.stage_id).not.toBeNull();
    expect(rows[1]!.stage_id).toBe(rows[0]!.stage_id);
  });

  it('writes each entry with its own entity, pipeline and stage when the entries name several', async () => {
    const account = await accountWithLeads(t);
    await putEntity(t, account, 'buyer', {
      ...LEAD_ENTITY,
      name: 'Buyer',
      pipelines: [{ name: 'Buying', stages: ['Asked', 'Bought'] }],
    });
    const response = await t.request({
      method: 'POST',
      url: '/api/v1/records/bulk',
      key: account.apiKey,
      headers: { 'x-request-id': 'bulk-batch-3' },
      body: {
        records: [
          { entity: 'lead', fields: { email: 'l1@b.co' } },
          { entity: 'buyer', fields: { email: 'b1@b.co' } },
          { entity: 'lead', fields: { email: 'l2@b.co' } },
        ],
      },
    });
    expect(response.statusCode).toBe(200);
    const { results } = response.json();
    const read = async (id: string) =>
      (await t.request({ method: 'GET', url: `/api/v1/records/${id}`, key: account.apiKey })).json();
    expect(await read(results[0].id)).toMatchObject({
      entity: 'lead',
      crm: { pipeline: 'Sales', stage: 'New' },
    });
    expect(await read(results[1].id)).toMatchObject({
      entity: 'buyer',
      crm: { pipeline: 'Buying', stage: 'Asked' },
    });
    expect(await read(results[2].id)).toMatchObject({
      entity: 'lead',
      crm: { pipeline: 'Sales', stage: 'New' },
    });
    // Values every entry shares are sent once and still land on every row.
    const rows = await t.db
      .selectFrom('records')
      .select(['source', 'origin', 'source_id'])
      .where('account_id', '=', account.id)
      .execute();
    expect(rows).toEqual(Array.from({ length: 3 }, () => ({ source: 'api', origin: {}, source_id: null })));
    const log = await t.db
      .selectFrom('intake_log')
      .select(['entity_key', 'items'])
      .where('request_id', '=', 'bulk-batch-3')
      .execute();
    expect(log).toEqual([
      {
        entity_key: null,
        items: results.map((result: { id: string }, index: number) => ({
          index,
          status: 'created',
          record_id: result.id,
        })),
      },
    ]);
  });

  describe('security', () => {
    it('refuses a whole call with a key revoked behind the node’s back, writing neither records nor its log entry', async () => {
      const account = await accountWithLeads(t);
      const created = (
        await t.request({
          method: 'POST',
          url: '/api/v1/settings/api-keys',
          key: account.apiKey,
          body: { name: 'bulk' },
        })
      ).json() as { id: string; key: string };
      const bulk = (requestId: string, email: string) =>
        t.request({
          method: 'POST',
          url: '/api/v1/records/bulk',
          key: created.key,
          headers: { 'x-request-id': requestId },
          body: {
            records: [
              { entity: 'lead', fields: { email } },
              { entity: 'lead', fields: { email: `2${email}` } },
            ],
          },
        });
      // Used once, so that this node remembers the key.
      expect((await bulk('bulk-warm', 'warm@b.co')).statusCode).toBe(200);
      await sql`UPDATE api_keys SET revoked_at = now() WHERE account_id = ${account.id} AND id = ${created.id}`.execute(
        t.db,
      );
      const refused = await bulk('bulk-revoked', 'gone@b.co');
      expect(refused.statusCode).toBe(401);
      const written = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM records WHERE account_id = ${account.id} AND email_lc LIKE '%gone@b.co'`.execute(
        t.db,
      );
      expect(written.rows[0]!.n).toBe(0);
      const logged = await t.db
        .selectFrom('intake_log')
        .select('id')
        .where('request_id', '=', 'bulk-revoked')
        .execute();
      expect(logged).toEqual([]);
      // And the node no longer takes the key from memory.
      expect((await bulk('bulk-after', 'after@b.co')).statusCode).toBe(401);
    });
  });
});

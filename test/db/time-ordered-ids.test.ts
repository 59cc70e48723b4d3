import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { millisecondsOf, TIME_ORDERED_UUID } from '../helpers/ids.ts';

/**
 * The rows that grow with every lead get time-ordered ids (UUID version 7: docs/decisions.md,
 * "Time-ordered ids"), whether the service makes the id or the statement does
 * (`time_ordered_uuid()`, migration 0021), so that their primary keys take new rows at the end.
 */
describe.each(TEST_DATABASES)('time-ordered ids on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind, { concurrentCreates: 1 });
  });
  afterAll(async () => t?.close());

  it('time_ordered_uuid() gives version 7 ids of the statement time, ordered across milliseconds', async () => {
    const before = Date.now();
    const { rows } = await sql<{ id: string }>`
      SELECT time_ordered_uuid()::text AS id FROM generate_series(1, 500)`.execute(t.db);
    const after = Date.now();
    expect(new Set(rows.map((row) => row.id)).size).toBe(500);
    for (const { id } of rows) {
      expect(id).toMatch(TIME_ORDERED_UUID);
      // The database's clock is this machine's: the same milliseconds, give or take rounding.
      expect(millisecondsOf(id)).toBeGreaterThanOrEqual(before - 1);
      expect(millisecondsOf(id)).toBeLessThanOrEqual(after + 1);
    }
    await new Promise((resolve) => setTimeout(resolve, 3));
    const later = await sql<{ id: string }>`SELECT time_ordered_uuid()::text AS id`.execute(t.db);
    expect(later.rows[0]!.id > rows[rows.length - 1]!.id).toBe(true);
  });

  it('time_ordered_uuid(at) gives the id of another time (as the growth seed gives its records)', async () => {
    const at = '2026-01-01T00:00:00.123Z';
    const { rows } = await sql<{ id: string }>`
      SELECT time_ordered_uuid(${at}::timestamptz)::text AS id FROM generate_series(1, 3)`.execute(t.db);
    for (const { id } of rows) {
      expect(id).toMatch(TIME_ORDERED_UUID);
      expect(millisecondsOf(id)).toBe(Date.parse(at));
    }
    expect(new Set(rows.map((row) => row.id)).size).toBe(3);
  });

  it('gives records, intake-log entries, notes, record events, stage history and webhook messages ids of their creation time', async () => {
    const account = await accountWithLeads(t, { modules: ['crm'] });
    // Its record.created messages are written by the creating statements (no worker sends them here).
    const webhook = await t.request({
      method: 'POST',
      url: '/api/v1/settings/webhooks',
      key: account.apiKey,
      body: { url: 'https://hooks.example.com/leads', events: ['record.created'] },
    });
    expect(webhook.statusCode).toBe(201);
    const before = Date.now();
    // Grouped single-record creations (with a note each), a bulk call, a note by email and a
    // stage move.
    const singles = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        t.request({
          method: 'POST',
          url: '/api/v1/records',
          key: account.apiKey,
          body: { entity: 'lead', fields: { email: `t${i}@ids.test` }, note: `first contact ${i}` },
        }),
      ),
    );
    expect(singles.map((answer) => answer.statusCode)).toEqual(Array(6).fill(201));
    const bulk = await t.request({
      method: 'POST',
      url: '/api/v1/records/bulk',
      key: account.apiKey,
      body: {
        records: Array.from({ length: 5 }, (_, i) => ({
          entity: 'lead',
          fields: { email: `b${i}@ids.test` },
        })),
      },
    });
    expect(bulk.statusCode).toBe(200);
    const note = await t.request({
      method: 'POST',
      url: '/api/v1/notes',
      key: account.apiKey,
      body: { email: 't0@ids.test', body: 'Called back' },
    });
    expect(note.statusCode).toBe(201);
    const moved = await t.request({
      method: 'POST',
      url: `/api/v1/crm/records/${singles[0]!.json().id}/stage`,
      key: account.apiKey,
      body: { stage: 'Contacted' },
    });
    expect(moved.statusCode).toBe(200);
    const after = Date.now();

    const tables = [
      'records',
      'intake_log',
      'notes',
      'record_events',
      'stage_history',
      'outbound_messages',
    ] as const;
    for (const table of tables) {
      const { rows } = await sql<{ id: string }>`
        SELECT id::text AS id FROM ${sql.table(table)} WHERE account_id = ${account.id}`.execute(t.db);
      expect(rows.length, table).toBeGreaterThan(0);
      for (const { id } of rows) {
        expect(id, table).toMatch(TIME_ORDERED_UUID);
        expect(millisecondsOf(id), table).toBeGreaterThanOrEqual(before - 1);
        expect(millisecondsOf(id), table).toBeLessThanOrEqual(after + 1);
      }
    }
    const records = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM records WHERE account_id = ${account.id}`.execute(t.db);
    expect(records.rows[0]!.n).toBe(11);
  });
});

import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, historyOf } from '../helpers/fixtures.ts';

/**
 * Until migration 0003 intake also stored a record's creation as a `lead_created` event and its
 * first stage as an open stage stay. Both are facts of the record row now; an upgraded database
 * must not show them twice.
 */
describe.each(TEST_DATABASES)('migration 0003 (creation on the record row) on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind);
  });
  afterAll(async () => t?.close());

  it('removes the stored copies of creations and first stages, and keeps every other history row', async () => {
    const account = await accountWithLeads(t);
    const created = await t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: account.apiKey,
      body: { entity: 'lead', fields: { email: 'old-style@b.co' }, note: 'kept' },
    });
    const id = created.json().id as string;
    const record = await t.db
      .selectFrom('records')
      .select(['pipeline_id', 'stage_id', 'created_at'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    // The rows the earlier intake wrote beside the record.
    await t.db
      .insertInto('record_events')
      .values({
        account_id: account.id,
        id: randomUUID(),
        record_id: id,
        type: 'lead_created',
        message: 'Created from api',
        actor: 'api',
        data: JSON.stringify({ source: 'api' }),
        created_at: record.created_at,
      })
      .execute();
    await t.db
      .insertInto('stage_history')
      .values({
        account_id: account.id,
        id: randomUUID(),
        record_id: id,
        pipeline_id: record.pipeline_id!,
        stage_id: record.stage_id!,
        entered_at: record.created_at,
      })
      .execute();
    expect(await historyOf(t, account.apiKey, id)).toEqual(['note_added', 'lead_created', 'lead_created']);

    await sql`DELETE FROM schema_migrations WHERE name = '0003_creation_on_record.sql'`.execute(t.db);
    expect((await migrate(t.db)).applied).toEqual(['0003_creation_on_record.sql']);

    expect(await historyOf(t, account.apiKey, id)).toEqual(['note_added', 'lead_created']);
    const stays = await t.db.selectFrom('stage_history').select('id').where('record_id', '=', id).execute();
    expect(stays).toEqual([]);
  });
});

import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createDemoOnce } from '../../src/start/bootstrap.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';

async function demoState(t: TestApp) {
  const accounts = await t.db.selectFrom('accounts').select('id').where('is_demo', '=', true).execute();
  const settings = await t.db
    .selectFrom('instance_settings')
    .select(['key', 'value'])
    .where('key', 'in', ['demo_created_at', 'demo_account_id'])
    .execute();
  const entities = await t.db.selectFrom('entities').select(['account_id', 'key']).execute();
  return { accounts, settings: Object.fromEntries(settings.map((row) => [row.key, row.value])), entities };
}

describe.each(TEST_DATABASES)('the demo account of a first start on %s', (kind) => {
  let t: TestApp;
  beforeEach(async () => {
    t = await startTestApp(kind);
  });
  afterEach(async () => t?.close());

  describe('happy path', () => {
    it('is created once, with its key and its entity; later starts create nothing', async () => {
      const demo = await createDemoOnce(t.db, t.services);
      expect(demo?.apiKey).toMatch(/^lk_/);
      expect(await createDemoOnce(t.db, t.services)).toBeNull();
      const state = await demoState(t);
      expect(state.accounts).toEqual([{ id: demo?.accountId }]);
      expect(state.settings.demo_account_id).toBe(demo?.accountId);
      expect(state.entities).toEqual([{ account_id: demo?.accountId, key: 'lead' }]);
      const entities = await t.request({ method: 'GET', url: '/api/v1/entities', key: demo?.apiKey });
      expect(entities.statusCode).toBe(200);
    });
  });

  describe('errors', () => {
    it('leaves nothing behind when the start dies between the claim and the demo, and the next start creates it', async () => {
      // The step after the claim and the account fails, as a crash there would end it.
      await sql
        .raw(`CREATE FUNCTION fail_demo_entity() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN RAISE EXCEPTION 'the start died here'; END $$`)
        .execute(t.db);
      await sql
        .raw(
          'CREATE TRIGGER fail_demo_entity BEFORE INSERT ON entities FOR EACH ROW EXECUTE FUNCTION fail_demo_entity()',
        )
        .execute(t.db);
      await expect(createDemoOnce(t.db, t.services)).rejects.toThrow('the start died here');
      expect(await demoState(t)).toEqual({ accounts: [], settings: {}, entities: [] });

      await sql.raw('DROP TRIGGER fail_demo_entity ON entities').execute(t.db);
      const demo = await createDemoOnce(t.db, t.services);
      expect(demo).not.toBeNull();
      const state = await demoState(t);
      expect(state.accounts).toEqual([{ id: demo?.accountId }]);
      expect(state.entities).toEqual([{ account_id: demo?.accountId, key: 'lead' }]);
    });
  });

  describe('security', () => {
    it('is created by one of two starts at once, never by both', async () => {
      // Two transactions at once over one database, as two nodes starting together make them.
      const results = await Promise.all([createDemoOnce(t.db, t.services), createDemoOnce(t.db, t.services)]);
      expect(results.filter((result) => result !== null)).toHaveLength(1);
      expect((await demoState(t)).accounts).toHaveLength(1);
    });
  });
});

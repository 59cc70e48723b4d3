import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { timeOrderedId } from '../../src/lib/ids.ts';
import { createRecordsRepo, type NewRecordRow } from '../../src/modules/records/records.repo.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, entityIdOf } from '../helpers/fixtures.ts';

/**
 * A grouped creation inserts its records plainly first when told it may (`optimistic`), and only
 * when a unique rule refuses one of them runs again skipping such records: the outcome is the
 * same either way, nothing of the failed first run stays.
 */
describe.each(TEST_DATABASES)('grouped creation and unique rules on %s', (kind) => {
  let t: TestApp;
  let accountId: string;
  let entityId: string;
  let repo: ReturnType<typeof createRecordsRepo>;
  beforeAll(async () => {
    t = await startTestApp(kind);
    const account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
    accountId = account.id;
    entityId = await entityIdOf(t, accountId, 'lead');
    repo = createRecordsRepo(t.db);
  });
  afterAll(async () => t?.close());

  function rowFor(email: string, externalId: string | null = null): NewRecordRow {
    return {
      id: timeOrderedId(),
      entityId,
      name: email,
      fields: { email },
      source: 'api',
      sourceId: null,
      origin: {},
      externalId,
      emailLc: email.toLowerCase(),
      dedupeKey: email.toLowerCase(),
      dedupeUnique: true,
      duplicateOf: null,
      pipelineId: null,
      stageId: null,
      assigneeId: null,
      viewerIds: [],
      createdBy: 'api:test',
    };
  }

  /** Items of a call logged as one entry (`callLog`), as a bulk call's are. */
  function itemsFor(rows: NewRecordRow[]) {
    return rows.map((row) => ({ row, notes: [], log: null, entityKey: 'lead' }));
  }

  function callLogFor(requestId: string, count: number) {
    return {
      requestId,
      endpoint: 'records.bulk',
      outcome: 'bulk' as const,
      statusCode: 200,
      recordId: null,
      entityKey: 'lead',
      source: 'api',
      warnings: [],
      error: null,
      items: Array.from({ length: count }, (_, index) => ({ index, status: 'created' as const })),
    };
  }

  async function storedIds(rows: NewRecordRow[]): Promise<string[]> {
    const found = await t.db
      .selectFrom('records')
      .select('id')
      .where('account_id', '=', accountId)
      .where(
        'id',
        'in',
        rows.map((row) => row.id),
      )
      .execute();
    return found.map((row) => row.id).sort();
  }

  async function logEntries(requestId: string): Promise<number> {
    const found = await t.db
      .selectFrom('intake_log')
      .select('id')
      .where('account_id', '=', accountId)
      .where('request_id', '=', requestId)
      .execute();
    return found.length;
  }

  describe('happy path', () => {
    it('writes every record and the call’s entry in one run when none is refused', async () => {
      const rows = [rowFor('a1@x.co'), rowFor('a2@x.co'), rowFor('a3@x.co')];
      const result = await repo.createManyInOneStatement(
        accountId,
        itemsFor(rows),
        [],
        callLogFor('many-1', 3),
        true,
      );
      expect(result).toMatchObject({ runs: 1, conflicted: false, logged: true });
      expect([...result.created.keys()].sort()).toEqual(rows.map((row) => row.id).sort());
      expect(await storedIds(rows)).toEqual(rows.map((row) => row.id).sort());
      expect(await logEntries('many-1')).toBe(1);
    });
  });

  describe('errors', () => {
    it('runs again skipping a record whose duplicate values an existing record holds, keeping nothing of the failed run', async () => {
      await repo.createManyInOneStatement(accountId, itemsFor([rowFor('held@x.co')]), [], null, true);
      const rows = [rowFor('b1@x.co'), rowFor('HELD@x.co'), rowFor('b3@x.co')];
      const result = await repo.createManyInOneStatement(
        accountId,
        itemsFor(rows),
        [],
        callLogFor('many-2', 3),
        true,
      );
      expect(result).toMatchObject({ runs: 2, conflicted: true, logged: false });
      const expected = [rows[0]!.id, rows[2]!.id].sort();
      expect([...result.created.keys()].sort()).toEqual(expected);
      expect(await storedIds(rows)).toEqual(expected);
      // The call's entry lists every record as created: written only when all were.
      expect(await logEntries('many-2')).toBe(0);
    });

    it('skips such a record in its one run when not optimistic', async () => {
      const rows = [rowFor('c1@x.co'), rowFor('held@x.co')];
      const result = await repo.createManyInOneStatement(accountId, itemsFor(rows), [], null, false);
      expect(result).toMatchObject({ runs: 1, conflicted: true });
      expect([...result.created.keys()]).toEqual([rows[0]!.id]);
      expect(await storedIds(rows)).toEqual([rows[0]!.id]);
    });

    it('keeps the first of two records of one call with the same duplicate values, and of two with one external id', async () => {
      const twins = [rowFor('d1@x.co'), rowFor('D1@x.co')];
      const byEmail = await repo.createManyInOneStatement(accountId, itemsFor(twins), [], null, true);
      expect(byEmail).toMatchObject({ runs: 2, conflicted: true });
      expect([...byEmail.created.keys()]).toEqual([twins[0]!.id]);

      const external = [rowFor('e1@x.co', 'ext-1'), rowFor('e2@x.co', 'ext-1')];
      const byExternalId = await repo.createManyInOneStatement(accountId, itemsFor(external), [], null, true);
      expect(byExternalId).toMatchObject({ runs: 2, conflicted: true });
      expect([...byExternalId.created.keys()]).toEqual([external[0]!.id]);
      expect(await storedIds([...twins, ...external])).toEqual([twins[0]!.id, external[0]!.id].sort());
    });
  });

  describe('security', () => {
    it('never refuses a record for another account’s record with the same values', async () => {
      const other = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
      const theirs = { ...rowFor('shared@x.co'), entityId: await entityIdOf(t, other.id, 'lead') };
      await repo.createManyInOneStatement(other.id, itemsFor([theirs]), [], null, true);
      const ours = rowFor('shared@x.co');
      const result = await repo.createManyInOneStatement(accountId, itemsFor([ours]), [], null, true);
      expect(result).toMatchObject({ runs: 1, conflicted: false });
      expect([...result.created.keys()]).toEqual([ours.id]);
    });
  });
});

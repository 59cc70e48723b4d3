import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRecordsReadRepo } from '../../src/modules/records/records.repo.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { compiledBy, planOf } from '../helpers/plans.ts';

/**
 * The plans PostgreSQL gives the record lists at scale (docs/decisions.md: "Speed at scale",
 * migration 0027 and src/db/keyset.ts): a page newest first or by change time reads its index
 * from the list's end or from the cursor, and sorts nothing. The statements are the ones the
 * records repo builds, taken from Kysely's compiler without running them, then explained by the
 * real database over 40,000 records of one account beside another account's. Without the index
 * of migration 0027 the newest-first page sorts the account's records; with the cursor written
 * as `time < at OR (time = at AND id < id)` the deep page filters from the first row instead of
 * starting the scan at the cursor.
 */
const RECORDS_PER_ACCOUNT = 40_000;

describe.each(TEST_DATABASES.filter((kind) => kind === 'postgres'))('record list plans on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t);
    const other = await accountWithLeads(t);
    for (const owner of [account, other]) {
      // Creation times one second apart going back from now, ids of those times (time-ordered,
      // as the service gives them), change times in another order than creation.
      await sql`
        INSERT INTO records (account_id, id, entity_id, name, created_at, updated_at)
        SELECT e.account_id, time_ordered_uuid(at), e.id, 'Record ' || i, at,
               at + ((i * 7919) % ${RECORDS_PER_ACCOUNT}) * interval '1 second'
        FROM entities e, generate_series(1, ${RECORDS_PER_ACCOUNT}) AS i,
             LATERAL (SELECT now() - i * interval '1 second' AS at) AS t
        WHERE e.account_id = ${owner.id} AND e.key = 'lead'`.execute(t.db);
    }
    await sql`ANALYZE records`.execute(t.db);
  }, 120_000);
  afterAll(async () => t?.close());

  /** The statement `list` sends, compiled as the service compiles it, and its plan on the database. */
  async function planOfList(...args: Parameters<ReturnType<typeof createRecordsReadRepo>['list']>) {
    const compiled = await compiledBy((db) => createRecordsReadRepo(db).list(...args));
    expect(compiled).toHaveLength(1);
    return planOf(t, compiled[0]!);
  }

  async function rowAt(column: 'created_at' | 'updated_at', offset: number) {
    const row = await t.db
      .selectFrom('records')
      .select(['id', column])
      .where('account_id', '=', account.id)
      .orderBy(column, 'desc')
      .orderBy('id', 'desc')
      .offset(offset)
      .limit(1)
      .executeTakeFirstOrThrow();
    const at = row[column] as Date;
    return { at: at.toISOString(), id: row.id };
  }

  it('newest first: the first page reads records_created from its end and sorts nothing', async () => {
    const nodes = await planOfList(account.id, {}, 'newest', 51, null);
    const scan = nodes.find((node) => node['Index Name'] === 'records_created');
    expect(scan, JSON.stringify(nodes.map((n) => n['Node Type']))).toBeDefined();
    expect(scan!['Scan Direction']).toBe('Backward');
    expect(nodes.map((node) => node['Node Type'])).not.toContain('Sort');
  });

  it('newest first: a deep page starts its scan at the cursor (the row comparison is an index bound)', async () => {
    const cursor = await rowAt('created_at', 30_000);
    const nodes = await planOfList(account.id, {}, 'newest', 51, cursor);
    const scan = nodes.find((node) => node['Index Name'] === 'records_created');
    expect(scan).toBeDefined();
    expect(scan!['Index Cond']).toMatch(/ROW\(created_at, id\) < ROW\(/);
    expect(nodes.map((node) => node['Node Type'])).not.toContain('Sort');
  });

  it('by change time: a deep page starts its scan at the cursor in records_updated', async () => {
    const cursor = await rowAt('updated_at', 30_000);
    const nodes = await planOfList(account.id, {}, 'updated', 51, cursor);
    const scan = nodes.find((node) => node['Index Name'] === 'records_updated');
    expect(scan).toBeDefined();
    expect(scan!['Scan Direction']).toBe('Forward');
    expect(scan!['Index Cond']).toMatch(/ROW\(updated_at, id\) > ROW\(/);
    expect(nodes.map((node) => node['Node Type'])).not.toContain('Sort');
  });
});

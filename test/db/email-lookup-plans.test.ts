import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRecordsReadRepo, createRecordsRepo } from '../../src/modules/records/records.repo.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, entityIdOf, LEAD_ENTITY, putEntity } from '../helpers/fixtures.ts';
import { compiledBy, genericPlanOf, type PlanNode } from '../helpers/plans.ts';

/**
 * The plans of the look-ups by email at scale (migration 0034, docs/decisions.md "A record's email
 * is indexed once"): a record under a unique duplicate rule on its email alone stands in
 * `records_dedupe_unique` only, the others in `records_email_rest`, and both look-ups (the single
 * one and the grouped notes statement) read both indexes and no table from its start. The plans
 * are the generic ones, as prepared statements run after their fifth execution, over 40,000
 * records of each kind beside another account's.
 */
const RECORDS_PER_KIND = 40_000;

describe.each(TEST_DATABASES.filter((kind) => kind === 'postgres'))('look-ups by email on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
    await putEntity(t, account, 'contact', { ...LEAD_ENTITY, name: 'Contact' });
    const other = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
    for (const owner of [account, other]) {
      const lead = await entityIdOf(t, owner.id, 'lead');
      const contact = owner === account ? await entityIdOf(t, owner.id, 'contact') : lead;
      await sql`
        INSERT INTO records (account_id, id, entity_id, email_lc, dedupe_key, dedupe_unique)
        SELECT ${owner.id}::uuid, gen_random_uuid(), ${lead}::uuid, 'lead' || i || '@plans.test',
          'lead' || i || '@plans.test', true
        FROM generate_series(1, ${RECORDS_PER_KIND}) AS i`.execute(t.db);
      await sql`
        INSERT INTO records (account_id, id, entity_id, email_lc)
        SELECT ${owner.id}::uuid, gen_random_uuid(), ${contact}::uuid, 'contact' || i || '@plans.test'
        FROM generate_series(1, ${RECORDS_PER_KIND}) AS i`.execute(t.db);
    }
    await sql`ANALYZE records`.execute(t.db);
  }, 120_000);
  afterAll(async () => t?.close());

  function expectBothIndexesAndNoTableScan(nodes: PlanNode[]) {
    const indexes = nodes.map((node) => node['Index Name']).filter(Boolean);
    expect(indexes).toContain('records_email_rest');
    expect(indexes).toContain('records_dedupe_unique');
    const scans = nodes.filter(
      (node) => node['Node Type'] === 'Seq Scan' && node['Relation Name'] === 'records',
    );
    expect(scans).toEqual([]);
  }

  it('the single look-up reads both indexes, with and without an entity', async () => {
    const lead = await entityIdOf(t, account.id, 'lead');
    for (const entityId of [undefined, lead]) {
      const [query] = await compiledBy((db) =>
        createRecordsReadRepo(db).findByEmail(account.id, 'lead7@plans.test', entityId, 20),
      );
      expectBothIndexesAndNoTableScan(await genericPlanOf(t, query!));
    }
    // And it finds a record of either kind.
    const reads = createRecordsReadRepo(t.db);
    expect(await reads.findByEmail(account.id, 'lead7@plans.test', undefined, 20)).toHaveLength(1);
    expect(await reads.findByEmail(account.id, 'contact7@plans.test', undefined, 20)).toHaveLength(1);
  });

  it('the grouped notes statement reads both indexes', async () => {
    const [query] = await compiledBy((db) =>
      createRecordsRepo(db).addNotesByMatch(account.id, [
        {
          noteId: '00000000-0000-7000-8000-000000000001',
          uncheckedKeyId: null,
          recordId: null,
          emailLc: 'contact9@plans.test',
          entityId: null,
          kind: 'general',
          body: 'plan',
          tag: null,
          senderName: null,
          event: { message: 'plan', actor: 'api', data: {} },
        },
      ]),
    );
    expectBothIndexesAndNoTableScan(await genericPlanOf(t, query!));
  });
});

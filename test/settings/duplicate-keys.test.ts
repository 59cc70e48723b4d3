import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recomputeDuplicateKeysJob } from '../../src/modules/entities/entities.jobs.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, LEAD_ENTITY } from '../helpers/fixtures.ts';
import { until } from '../jobs/support.ts';

const EMAIL_RULE = { match: ['email'], action: 'update' };
const PHONE_RULE = { match: ['phone'], action: 'update' };

async function putRule(t: TestApp, account: TestAccount, rule: object | null) {
  return t.request({
    method: 'PUT',
    url: '/api/v1/settings/entities/lead',
    key: account.apiKey,
    body: { ...LEAD_ENTITY, duplicate_rule: rule },
  });
}

async function duplicateKeysOf(t: TestApp, account: TestAccount) {
  const response = await t.request({
    method: 'GET',
    url: '/api/v1/settings/entities/lead',
    key: account.apiKey,
  });
  expect(response.statusCode).toBe(200);
  return response.json().duplicate_keys as { status: string; done: number; total: number };
}

async function intake(t: TestApp, account: TestAccount, fields: Record<string, unknown>) {
  return t.request({
    method: 'POST',
    url: '/api/v1/records',
    key: account.apiKey,
    body: { entity: 'lead', fields },
  });
}

async function storedKeys(t: TestApp, account: TestAccount) {
  const rows = await t.db
    .selectFrom('records')
    .select(['id', 'dedupe_key', 'dedupe_unique'])
    .where('account_id', '=', account.id)
    .execute();
  return new Map(rows.map((row) => [row.id, { key: row.dedupe_key, unique: row.dedupe_unique }]));
}

async function waitUntilCurrent(t: TestApp, account: TestAccount) {
  await until(async () => (await duplicateKeysOf(t, account)).status === 'current', 30_000);
}

describe.each(TEST_DATABASES)('duplicate keys follow a changed duplicate rule on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    // One process: its definitions need no time to reach other processes' caches, so the
    // recompute starts 1.1 s after a change instead of 3 s.
    t = await startTestApp(kind, { queue: {}, entityCacheTtlMs: 100 });
  });
  afterAll(async () => t?.close());

  describe('happy path', () => {
    it('re-keys the stored records in the background, so that the new rule holds for them', async () => {
      const account = await accountWithLeads(t, { duplicateRule: EMAIL_RULE });
      expect(await duplicateKeysOf(t, account)).toEqual({ status: 'current', done: 0, total: 0 });
      const first = (await intake(t, account, { email: 'a@dk.test', phone: '+49 30 1111' })).json().id;
      const second = (await intake(t, account, { email: 'b@dk.test', phone: '+49 30 1111' })).json().id;
      const noPhone = (await intake(t, account, { email: 'c@dk.test' })).json().id;
      // Notes find a record by email in the index that holds it: under the email rule the rule's
      // unique key, after the change the email's own (migration 0034).
      const noteFor = async (email: string) => {
        const response = await t.request({
          method: 'POST',
          url: '/api/v1/notes',
          key: account.apiKey,
          body: { email, body: 'found' },
        });
        expect(response.statusCode).toBe(201);
        return response.json().record_id as string;
      };
      expect(await noteFor('C@dk.test')).toBe(noPhone);

      const changed = await putRule(t, account, PHONE_RULE);
      expect(changed.statusCode).toBe(200);
      expect(changed.json().duplicate_keys).toEqual({ status: 'recomputing', done: 0, total: 3 });

      // While the keys are recomputed, intake keys new records under the new rule at once.
      const during = await intake(t, account, { email: 'd@dk.test', phone: '+49 30 2222' });
      expect(during.statusCode).toBe(201);
      const duringRow = await t.db
        .selectFrom('records')
        .select(['dedupe_key', 'dedupe_unique'])
        .where('id', '=', during.json().id)
        .executeTakeFirstOrThrow();
      expect(duringRow).toEqual({ dedupe_key: '+49 30 2222', dedupe_unique: true });

      await waitUntilCurrent(t, account);
      expect(await duplicateKeysOf(t, account)).toEqual({ status: 'current', done: 3, total: 3 });
      const keys = await storedKeys(t, account);
      expect(keys.get(first)?.key).toBe('+49 30 1111');
      expect(keys.get(second)?.key).toBe('+49 30 1111');
      // One of the two that share the new key holds it uniquely, so that intake finds the pair.
      expect([keys.get(first)?.unique, keys.get(second)?.unique].sort()).toEqual([false, true]);
      expect(keys.get(noPhone)).toEqual({ key: null, unique: false });
      expect(await noteFor('c@dk.test')).toBe(noPhone);
      expect(await noteFor('a@dk.test')).toBe(first);

      // The new rule holds for the old records: the same phone updates the oldest of them ...
      const repeated = await intake(t, account, { email: 'e@dk.test', phone: '+49 30 1111' });
      expect(repeated.statusCode).toBe(200);
      expect(repeated.json()).toMatchObject({ id: first, created: false, updated: true });
      // ... and the old rule no longer does: the same email makes a new record.
      const sameEmail = await intake(t, account, { email: 'c@dk.test' });
      expect(sameEmail.statusCode).toBe(201);
      expect(sameEmail.json().id).not.toBe(noPhone);
    }, 60_000);

    it('lets a newer rule change supersede a recompute that has not finished', async () => {
      const account = await accountWithLeads(t, { duplicateRule: EMAIL_RULE });
      const ids = [];
      for (const [email, phone] of [
        ['f@dk.test', '+49 30 3333'],
        ['g@dk.test', '+49 30 4444'],
      ]) {
        ids.push((await intake(t, account, { email, phone })).json().id);
      }
      const jobsBefore = t.jobLog.filter((line) => line.job === recomputeDuplicateKeysJob.name).length;
      expect((await putRule(t, account, PHONE_RULE)).statusCode).toBe(200);
      const last = await putRule(t, account, { match: ['email', 'phone'], action: 'ignore' });
      expect(last.json().duplicate_keys).toEqual({ status: 'recomputing', done: 0, total: 2 });

      await waitUntilCurrent(t, account);
      await until(
        () => t.jobLog.filter((line) => line.job === recomputeDuplicateKeysJob.name).length >= jobsBefore + 2,
        30_000,
      );
      const outputs = t.jobLog
        .filter((line) => line.job === recomputeDuplicateKeysJob.name && line.msg === 'job completed')
        .slice(-2)
        .map((line) => line.output);
      expect(outputs).toContainEqual({ rekeyed: 0, superseded: true });
      expect(outputs).toContainEqual({ rekeyed: 2, superseded: false });
      const keys = await storedKeys(t, account);
      expect(keys.get(ids[0])).toEqual({ key: 'f@dk.test\u001f+49 30 3333', unique: true });
      expect(keys.get(ids[1])).toEqual({ key: 'g@dk.test\u001f+49 30 4444', unique: true });
    }, 60_000);

    it('clears the keys when the rule is removed, and takes the uniqueness away under a create rule', async () => {
      const account = await accountWithLeads(t, { duplicateRule: EMAIL_RULE });
      const id = (await intake(t, account, { email: 'h@dk.test' })).json().id;
      expect((await putRule(t, account, { match: ['email'], action: 'create' })).statusCode).toBe(200);
      await waitUntilCurrent(t, account);
      expect((await storedKeys(t, account)).get(id)).toEqual({ key: 'h@dk.test', unique: false });
      expect((await putRule(t, account, null)).statusCode).toBe(200);
      await waitUntilCurrent(t, account);
      expect((await storedKeys(t, account)).get(id)).toEqual({ key: null, unique: false });
    }, 60_000);

    it('finds the oldest record of a key whether the unique index holds it or not', async () => {
      const account = await accountWithLeads(t, { duplicateRule: EMAIL_RULE });
      const oldest = (await intake(t, account, { email: 'o@dk.test' })).json().id;
      expect((await putRule(t, account, { match: ['email'], action: 'create' })).statusCode).toBe(200);
      await waitUntilCurrent(t, account);
      // Under the create rule no record holds the key uniquely: the link names the oldest.
      const linked = await intake(t, account, { email: 'o@dk.test' });
      expect(linked.statusCode).toBe(201);
      const second = linked.json().id;
      const linkOf = async (id: string) =>
        (
          await t.db
            .selectFrom('records')
            .select('duplicate_of')
            .where('id', '=', id)
            .executeTakeFirstOrThrow()
        ).duplicate_of;
      expect(await linkOf(second)).toBe(oldest);
      const third = (await intake(t, account, { email: 'o@dk.test' })).json().id;
      expect(await linkOf(third)).toBe(oldest);
      expect([...(await storedKeys(t, account)).values()].map((k) => k.unique)).toEqual([
        false,
        false,
        false,
      ]);

      // Unique again: the oldest holds the key, the two others stay shared, and the next
      // handover with that email updates the oldest.
      expect((await putRule(t, account, EMAIL_RULE)).statusCode).toBe(200);
      await waitUntilCurrent(t, account);
      const keys = await storedKeys(t, account);
      expect([keys.get(oldest)?.unique, keys.get(second)?.unique, keys.get(third)?.unique]).toEqual([
        true,
        false,
        false,
      ]);
      const repeated = await intake(t, account, { email: 'O@dk.test', first_name: 'Olga' });
      expect(repeated.statusCode).toBe(200);
      expect(repeated.json()).toMatchObject({ id: oldest, created: false, updated: true });
    }, 60_000);

    it('stores the email anew when the email role moves, so that notes find records by the new field', async () => {
      const account = await accountWithLeads(t);
      const withWorkEmail = (emailRole: 'email' | 'work_email') => ({
        ...LEAD_ENTITY,
        fields: [
          ...LEAD_ENTITY.fields.map((field) =>
            field.key === 'email' ? { ...field, role: emailRole === 'email' ? 'email' : null } : field,
          ),
          {
            key: 'work_email',
            label: 'Work email',
            type: 'text',
            format: 'email',
            role: emailRole === 'work_email' ? 'email' : null,
          },
        ],
        duplicate_rule: null,
      });
      const put = (body: object) =>
        t.request({ method: 'PUT', url: '/api/v1/settings/entities/lead', key: account.apiKey, body });
      expect((await put(withWorkEmail('email'))).statusCode).toBe(200);
      const id = (await intake(t, account, { email: 'Home@dk.test', work_email: 'Work@dk.test' })).json().id;
      const note = (email: string) =>
        t.request({ method: 'POST', url: '/api/v1/notes', key: account.apiKey, body: { email, body: 'hi' } });
      expect((await note('work@dk.test')).statusCode).toBe(404);

      const moved = await put(withWorkEmail('work_email'));
      expect(moved.json().duplicate_keys).toMatchObject({ status: 'recomputing', total: 1 });
      await waitUntilCurrent(t, account);
      expect((await note('work@dk.test')).json()).toMatchObject({ record_id: id });
      expect((await note('home@dk.test')).statusCode).toBe(404);
    }, 60_000);

    it('needs no recompute when the rule stays the same or the entity has no records', async () => {
      const account = await accountWithLeads(t, { duplicateRule: EMAIL_RULE });
      const unchanged = await putRule(t, account, EMAIL_RULE);
      expect(unchanged.json().duplicate_keys).toEqual({ status: 'current', done: 0, total: 0 });
      const empty = await putRule(t, account, PHONE_RULE);
      expect(empty.json().duplicate_keys).toEqual({ status: 'current', done: 0, total: 0 });
    });
  });

  describe('errors', () => {
    it('answers 404 for an entity the account does not have', async () => {
      const account = await accountWithLeads(t);
      const response = await t.request({
        method: 'GET',
        url: '/api/v1/settings/entities/nothing',
        key: account.apiKey,
      });
      expect(response.statusCode).toBe(404);
      expect(response.json().error).toBe('not_found');
    });
  });

  describe('security', () => {
    it("re-keys only the account's own records, and shows its entity to no other account", async () => {
      const mine = await accountWithLeads(t, { duplicateRule: EMAIL_RULE });
      const other = await accountWithLeads(t, { duplicateRule: EMAIL_RULE });
      const otherRecord = (await intake(t, other, { email: 'i@dk.test', phone: '+49 30 5555' })).json().id;
      await intake(t, mine, { email: 'i@dk.test', phone: '+49 30 5555' });
      expect((await putRule(t, mine, PHONE_RULE)).statusCode).toBe(200);
      await waitUntilCurrent(t, mine);
      expect((await storedKeys(t, other)).get(otherRecord)).toEqual({ key: 'i@dk.test', unique: true });
      expect(await duplicateKeysOf(t, other)).toEqual({ status: 'current', done: 0, total: 0 });
      const settings = await t.request({
        method: 'GET',
        url: '/api/v1/settings/entities/lead',
        key: other.apiKey,
      });
      expect(settings.json().id).not.toBe(
        (await t.request({ method: 'GET', url: '/api/v1/settings/entities/lead', key: mine.apiKey })).json()
          .id,
      );
    }, 60_000);
  });
});

describe.each(TEST_DATABASES)('a duplicate-key recompute in batches on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    // Jobs are written but not worked here: the test runs the job's work itself, step by step.
    t = await startTestApp(kind, { queue: { work: false } });
  });
  afterAll(async () => t?.close());

  async function accountWithRecords(count: number) {
    const account = await accountWithLeads(t, { duplicateRule: EMAIL_RULE });
    for (let call = 0; call < count / 100; call++) {
      const response = await t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key: account.apiKey,
        body: {
          records: Array.from({ length: 100 }, (_, i) => ({
            entity: 'lead',
            fields: { email: `r${call * 100 + i}@batch.test`, phone: `+49 30 ${(call * 100 + i) % 550}` },
          })),
        },
      });
      expect(response.json().accepted).toBe(100);
    }
    return account;
  }

  async function recomputeTarget(account: TestAccount) {
    const entity = await t.db
      .selectFrom('entities')
      .select(['id', 'dedupe_rule_version'])
      .where('account_id', '=', account.id)
      .executeTakeFirstOrThrow();
    return { accountId: account.id, entityId: entity.id, version: entity.dedupe_rule_version };
  }

  it('is enqueued with the rule change, stores its position with each batch, and resumes there', async () => {
    const account = await accountWithRecords(1100);
    expect((await putRule(t, account, PHONE_RULE)).json().duplicate_keys).toEqual({
      status: 'recomputing',
      done: 0,
      total: 1100,
    });
    const target = await recomputeTarget(account);
    const { rows: queued } = await sql<{ data: unknown; state: string }>`
      SELECT data, state FROM pgboss.job
      WHERE name = ${recomputeDuplicateKeysJob.name} AND data->>'accountId' = ${account.id}`.execute(t.db);
    expect(queued).toEqual([{ data: target, state: 'created' }]);

    // A worker that stops after the first batch (its shutdown grace period ran out).
    let checks = 0;
    const stoppingAfterOneBatch = {
      get aborted() {
        checks += 1;
        return checks > 1;
      },
    } as AbortSignal;
    await expect(t.services.entities.recomputeDuplicateKeys(target, stoppingAfterOneBatch)).rejects.toThrow(
      'resumes where it stopped',
    );
    expect(await duplicateKeysOf(t, account)).toEqual({ status: 'recomputing', done: 500, total: 1100 });

    const resumed = await t.services.entities.recomputeDuplicateKeys(target, new AbortController().signal);
    expect(resumed).toEqual({ rekeyed: 600, superseded: false });
    expect(await duplicateKeysOf(t, account)).toEqual({ status: 'current', done: 1100, total: 1100 });
    const { rows } = await sql<{ keys: number; unique_keys: number; stale: number }>`
      SELECT count(DISTINCT dedupe_key)::int AS keys,
             count(*) FILTER (WHERE dedupe_unique)::int AS unique_keys,
             count(*) FILTER (WHERE dedupe_key NOT LIKE '+49 30 %')::int AS stale
      FROM records WHERE account_id = ${account.id}`.execute(t.db);
    expect(rows[0]).toEqual({ keys: 550, unique_keys: 550, stale: 0 });

    // A job of an older rule that runs late changes nothing.
    expect(await t.services.entities.recomputeDuplicateKeys(target, new AbortController().signal)).toEqual({
      rekeyed: 0,
      superseded: true,
    });
  }, 120_000);

  it('keeps intake answering while it runs, and leaves every shared key held uniquely once', async () => {
    const account = await accountWithRecords(1000);
    await putRule(t, account, PHONE_RULE);
    const target = await recomputeTarget(account);
    // Handovers whose phone the stored records get under the new rule, while those are re-keyed.
    const [recomputed, ...answers] = await Promise.all([
      t.services.entities.recomputeDuplicateKeys(target, new AbortController().signal),
      ...Array.from({ length: 40 }, (_, i) =>
        intake(t, account, { email: `late${i}@batch.test`, phone: `+49 30 ${i * 13}` }),
      ),
    ]);
    expect(recomputed).toEqual({ rekeyed: expect.any(Number), superseded: false });
    for (const answer of answers) expect([200, 201]).toContain(answer.statusCode);
    const { rows } = await sql<{ dedupe_key: string; unique_holders: number }>`
      SELECT dedupe_key, count(*) FILTER (WHERE dedupe_unique)::int AS unique_holders
      FROM records WHERE account_id = ${account.id} GROUP BY dedupe_key`.execute(t.db);
    expect(rows.length).toBeGreaterThanOrEqual(550);
    for (const row of rows) expect(row, row.dedupe_key).toMatchObject({ unique_holders: 1 });
  }, 120_000);
});

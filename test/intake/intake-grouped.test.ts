import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, historyOf } from '../helpers/fixtures.ts';

/**
 * Single-record creations that arrive while another is being written go together in one
 * statement (group commit). With one creation at a time, concurrent requests must group, and
 * each must still get exactly the answer and the rows it would get alone.
 */
describe.each(TEST_DATABASES)('grouped single-record intake on %s', (kind) => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp(kind, { concurrentCreates: 1 });
  });
  afterAll(async () => t?.close());

  const lead = (email: string) => ({ entity: 'lead', fields: { email, first_name: 'Grace' } });
  const post = (key: string, body: object) =>
    t.request({ method: 'POST', url: '/api/v1/records', key, body });

  async function rows<T>(query: ReturnType<typeof sql<T>>): Promise<T[]> {
    return (await query.execute(t.db)).rows;
  }

  describe('happy path', () => {
    it('answers every concurrent request with its own record, history and log entry', async () => {
      const account = await accountWithLeads(t);
      const answers = await Promise.all(
        Array.from({ length: 30 }, (_, i) => post(account.apiKey, lead(`g${i}@x.test`))),
      );
      expect(answers.map((answer) => answer.statusCode)).toEqual(Array(30).fill(201));
      const ids = answers.map((answer) => answer.json().id as string);
      expect(new Set(ids).size).toBe(30);
      const records = await rows(sql<{ id: string; email_lc: string }>`
        SELECT id, email_lc FROM records WHERE account_id = ${account.id}`);
      expect(records).toHaveLength(30);
      for (const [i, id] of ids.entries()) {
        expect(records.find((record) => record.id === id)?.email_lc).toBe(`g${i}@x.test`);
      }
      // Rows written by one statement share its transaction: fewer transactions than records
      // shows that requests were grouped (on PGlite too, where the requests of one turn of the
      // event loop go together).
      const transactions = await rows(sql<{ n: number }>`
        SELECT count(DISTINCT xmin::text)::int AS n FROM records WHERE account_id = ${account.id}`);
      expect(transactions[0]!.n).toBeLessThan(30);
      for (const id of ids) expect(await historyOf(t, account.apiKey, id)).toEqual(['lead_created']);
      const log = await rows(sql<{ record_id: string; request_id: string }>`
        SELECT record_id, request_id FROM intake_log WHERE account_id = ${account.id} AND outcome = 'created'`);
      expect(new Set(log.map((entry) => entry.record_id))).toEqual(new Set(ids));
      expect(new Set(log.map((entry) => entry.request_id)).size).toBe(30);
    });
  });

  describe('errors', () => {
    it('creates one record and updates it for concurrent duplicates under an update rule', async () => {
      const account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          post(account.apiKey, { entity: 'lead', fields: { email: 'same@x.test', rooms: i + 1 } }),
        ),
      );
      expect(answers.filter((answer) => answer.statusCode === 201)).toHaveLength(1);
      expect(answers.filter((answer) => answer.statusCode === 200)).toHaveLength(9);
      expect(new Set(answers.map((answer) => answer.json().id)).size).toBe(1);
      const records = await rows(sql<{ n: number }>`
        SELECT count(*)::int AS n FROM records WHERE account_id = ${account.id}`);
      expect(records[0]!.n).toBe(1);
    });
  });

  describe('security', () => {
    it('refuses the requests of a key revoked elsewhere and writes the others of the same group', async () => {
      const account = await accountWithLeads(t);
      const keys: { id: string; key: string }[] = [];
      for (const name of ['live', 'revoked']) {
        const created = await t.request({
          method: 'POST',
          url: '/api/v1/settings/api-keys',
          key: account.apiKey,
          body: { name },
        });
        keys.push(created.json());
      }
      const [live, revoked] = keys as [{ id: string; key: string }, { id: string; key: string }];
      // Both keys are read once, so that this node remembers them.
      expect((await post(live.key, lead('warm-live@x.test'))).statusCode).toBe(201);
      expect((await post(revoked.key, lead('warm-revoked@x.test'))).statusCode).toBe(201);
      await sql`UPDATE api_keys SET revoked_at = now() WHERE account_id = ${account.id} AND id = ${revoked.id}`.execute(
        t.db,
      );
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          post(i % 2 === 0 ? live.key : revoked.key, lead(`mixed${i}@x.test`)),
        ),
      );
      answers.forEach((answer, i) => {
        expect(answer.statusCode).toBe(i % 2 === 0 ? 201 : 401);
      });
      const records = await rows(sql<{ email_lc: string }>`
        SELECT email_lc FROM records WHERE account_id = ${account.id} AND email_lc LIKE 'mixed%'`);
      expect(records.map((record) => record.email_lc).sort()).toEqual(
        Array.from({ length: 10 }, (_, i) => `mixed${i * 2}@x.test`).sort(),
      );
    });

    it('never groups the records of two accounts in one statement', async () => {
      const first = await accountWithLeads(t);
      const second = await accountWithLeads(t);
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          post((i % 2 === 0 ? first : second).apiKey, lead(`acct${i}@x.test`)),
        ),
      );
      expect(answers.every((answer) => answer.statusCode === 201)).toBe(true);
      for (const [index, account] of [first, second].entries()) {
        const records = await rows(sql<{ email_lc: string }>`
          SELECT email_lc FROM records WHERE account_id = ${(account as TestAccount).id}`);
        expect(records.map((record) => record.email_lc).sort()).toEqual(
          Array.from({ length: 10 }, (_, i) => `acct${i * 2 + index}@x.test`).sort(),
        );
      }
    });
  });
});

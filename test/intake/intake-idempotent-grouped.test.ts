import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestHash } from '../../src/modules/idempotency/idempotency.service.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

/**
 * Idempotent single-record intake goes with the grouped creations: a new record is written with
 * its idempotency key's row, done and holding the answer, by the grouped statement; anything that
 * statement cannot take (a key already held, a unique rule, a revoked key) goes the claiming way.
 * The interface's semantics stay exactly those of decisions §4.
 */
describe.each(TEST_DATABASES)('idempotent intake, grouped, on %s', (kind) => {
  let t: TestApp;

  beforeAll(async () => {
    // One grouped statement at a time: concurrent requests must share statements.
    t = await startTestApp(kind, { concurrentCreates: 1 });
  });
  afterAll(async () => t?.close());

  const lead = (email: string, first = 'Grace') => ({ entity: 'lead', fields: { email, first_name: first } });
  const post = (apiKey: string, body: object, idempotencyKey: string) =>
    t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: apiKey,
      body,
      headers: { 'idempotency-key': idempotencyKey },
    });

  async function rows<T>(query: ReturnType<typeof sql<T>>): Promise<T[]> {
    return (await query.execute(t.db)).rows;
  }
  const recordCount = async (account: TestAccount) =>
    (
      await rows(sql<{ n: number }>`SELECT count(*)::int AS n FROM records WHERE account_id = ${account.id}`)
    )[0]!.n;
  const keyRows = (account: TestAccount) =>
    rows(sql<{ key: string; state: string; status_code: number | null; response: unknown; xmin: string }>`
      SELECT key, state, status_code, response, xmin::text AS xmin FROM idempotency_keys
      WHERE account_id = ${account.id} ORDER BY key`);

  describe('happy path', () => {
    it('writes concurrent new records with their stored answers in shared statements, and replays each', async () => {
      const account = await accountWithLeads(t);
      const answers = await Promise.all(
        Array.from({ length: 30 }, (_, i) => post(account.apiKey, lead(`i${i}@x.test`), `key-${i}`)),
      );
      expect(answers.map((answer) => answer.statusCode)).toEqual(Array(30).fill(201));
      expect(answers.every((answer) => answer.headers['idempotent-replayed'] === undefined)).toBe(true);
      const ids = answers.map((answer) => answer.json().id as string);
      expect(new Set(ids).size).toBe(30);
      expect(await recordCount(account)).toBe(30);

      const keys = await keyRows(account);
      expect(keys).toHaveLength(30);
      for (const [i, answer] of answers.entries()) {
        const row = keys.find((k) => k.key === `key-${i}`)!;
        expect(row.state).toBe('done');
        expect(row.status_code).toBe(201);
        expect(row.response).toEqual(answer.json());
      }
      // Each key's row was written by the statement that wrote its record, and statements were shared.
      const pairs = await rows(sql<{ same: boolean }>`
        SELECT k.xmin::text = r.xmin::text AS same
        FROM idempotency_keys k JOIN records r ON r.account_id = k.account_id AND r.id = (k.response->>'id')::uuid
        WHERE k.account_id = ${account.id}`);
      expect(pairs).toHaveLength(30);
      expect(pairs.every((pair) => pair.same)).toBe(true);
      expect(new Set(keys.map((k) => k.xmin)).size).toBeLessThan(30);

      const repeats = await Promise.all(
        Array.from({ length: 30 }, (_, i) => post(account.apiKey, lead(`i${i}@x.test`), `key-${i}`)),
      );
      for (const [i, repeat] of repeats.entries()) {
        expect(repeat.statusCode).toBe(201);
        expect(repeat.headers['idempotent-replayed']).toBe('true');
        expect(repeat.json()).toEqual(answers[i]!.json());
      }
      expect(await recordCount(account)).toBe(30);
    });

    it('creates one record for concurrent requests with the same key, and gives them all its answer', async () => {
      const account = await accountWithLeads(t);
      const answers = await Promise.all(
        Array.from({ length: 12 }, () => post(account.apiKey, lead('same@x.test'), 'the-key')),
      );
      expect(answers.map((answer) => answer.statusCode)).toEqual(Array(12).fill(201));
      expect(new Set(answers.map((answer) => answer.json().id)).size).toBe(1);
      expect(answers.filter((answer) => answer.headers['idempotent-replayed'] === undefined)).toHaveLength(1);
      expect(await recordCount(account)).toBe(1);
      const log = await rows(sql<{ n: number }>`
        SELECT count(*)::int AS n FROM intake_log WHERE account_id = ${account.id} AND outcome = 'created'`);
      expect(log[0]!.n).toBe(1);
    });

    it('keeps plain creations of the same moment apart from the idempotent ones', async () => {
      const account = await accountWithLeads(t);
      const plain = (email: string) =>
        t.request({ method: 'POST', url: '/api/v1/records', key: account.apiKey, body: lead(email) });
      const answers = await Promise.all([
        ...Array.from({ length: 10 }, (_, i) => post(account.apiKey, lead(`k${i}@x.test`), `mixed-${i}`)),
        ...Array.from({ length: 10 }, (_, i) => plain(`p${i}@x.test`)),
      ]);
      expect(answers.map((answer) => answer.statusCode)).toEqual(Array(20).fill(201));
      expect(await recordCount(account)).toBe(20);
      expect(await keyRows(account)).toHaveLength(10);
    });
  });

  describe('errors', () => {
    it('refuses concurrent requests that reuse a key with another body, creating one record', async () => {
      const account = await accountWithLeads(t);
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) => post(account.apiKey, lead(`r${i}@x.test`), 'reused')),
      );
      const created = answers.filter((answer) => answer.statusCode === 201);
      expect(created).toHaveLength(1);
      for (const answer of answers.filter((a) => a.statusCode !== 201)) {
        expect(answer.statusCode).toBe(422);
        expect(answer.json().error).toBe('idempotency_key_reused');
      }
      expect(await recordCount(account)).toBe(1);
    });

    it('updates a duplicate under an update rule the claiming way, storing that answer and no other row', async () => {
      const account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
      const first = await post(account.apiKey, lead('dup@x.test', 'Ada'), 'dup-1');
      expect(first.statusCode).toBe(201);
      // The duplicate, with new creations of the same moment in the same group.
      const [update, ...others] = await Promise.all([
        post(account.apiKey, lead('dup@x.test', 'Grace'), 'dup-2'),
        ...Array.from({ length: 6 }, (_, i) => post(account.apiKey, lead(`n${i}@x.test`), `new-${i}`)),
      ]);
      expect(update!.statusCode).toBe(200);
      expect(update!.json()).toMatchObject({ id: first.json().id, created: false, updated: true });
      expect(others.map((answer) => answer.statusCode)).toEqual(Array(6).fill(201));
      expect(await recordCount(account)).toBe(7);
      const stored = (await keyRows(account)).find((k) => k.key === 'dup-2')!;
      expect(stored).toMatchObject({ state: 'done', status_code: 200 });
      expect(stored.response).toEqual(update!.json());
      const replay = await post(account.apiKey, lead('dup@x.test', 'Grace'), 'dup-2');
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.json()).toEqual(update!.json());
    });

    it('stores a refusal as the key’s answer and replays it', async () => {
      const account = await accountWithLeads(t);
      const refused = await post(
        account.apiKey,
        { entity: 'lead', fields: { first_name: 'No email' } },
        'bad',
      );
      expect(refused.statusCode).toBe(422);
      const again = await post(account.apiKey, { entity: 'lead', fields: { first_name: 'No email' } }, 'bad');
      expect(again.statusCode).toBe(422);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.json()).toEqual(refused.json());
      expect(await recordCount(account)).toBe(0);
    });

    it('answers with a settling answer whose process died, and never runs its work again', async () => {
      const account = await accountWithLeads(t);
      const body = lead('settled@x.test');
      // As an intake with a distribution node leaves it when its process dies in the wait for the
      // first deliveries: the record written, the answer stored while settling, the lease run out.
      const stored = {
        id: '00000000-0000-4000-8000-00000000d1ed',
        entity: 'lead',
        created: true,
        updated: false,
        warnings: [],
      };
      await rows(sql`
        INSERT INTO idempotency_keys (account_id, scope, key, request_hash, state, status_code, response,
          lease_until, expires_at)
        VALUES (${account.id}, 'POST /api/v1/records', 'died', ${requestHash(body)}, 'settling', 201,
          ${JSON.stringify(stored)}::jsonb, now() - interval '1 second', now() + interval '1 hour')`);
      const repeat = await post(account.apiKey, body, 'died');
      expect(repeat.statusCode).toBe(201);
      expect(repeat.headers['idempotent-replayed']).toBe('true');
      expect(repeat.json()).toEqual(stored);
      expect(await recordCount(account)).toBe(0);
      expect((await post(account.apiKey, lead('other@x.test'), 'died')).statusCode).toBe(422);
    });
  });

  describe('security', () => {
    it('refuses a key revoked behind the node’s back and stores nothing for it', async () => {
      const account = await accountWithLeads(t);
      const made = await t.request({
        method: 'POST',
        url: '/api/v1/settings/api-keys',
        key: account.apiKey,
        body: { name: 'remembered' },
      });
      const { id, key } = made.json() as { id: string; key: string };
      expect((await post(key, lead('before@x.test'), 'before')).statusCode).toBe(201);
      await sql`UPDATE api_keys SET revoked_at = now() WHERE account_id = ${account.id} AND id = ${id}`.execute(
        t.db,
      );
      const refused = await post(key, lead('after@x.test'), 'after');
      expect(refused.statusCode).toBe(401);
      expect(await recordCount(account)).toBe(1);
      expect((await keyRows(account)).map((k) => k.key)).toEqual(['before']);
    });

    it('keeps another account’s key apart: the same key in two accounts makes two records', async () => {
      const one = await accountWithLeads(t);
      const two = await accountWithLeads(t);
      const [a, b] = await Promise.all([
        post(one.apiKey, lead('x@x.test'), 'shared'),
        post(two.apiKey, lead('x@x.test'), 'shared'),
      ]);
      expect(a.statusCode).toBe(201);
      expect(b.statusCode).toBe(201);
      expect(a.json().id).not.toBe(b.json().id);
      const replay = await post(two.apiKey, lead('x@x.test'), 'shared');
      expect(replay.json().id).toBe(b.json().id);
    });
  });
});

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

/**
 * Single-record intake takes a key read in the last seconds from memory and checks it in the
 * statement that writes (one round trip). These tests revoke keys behind the node's back, in
 * the database, as another node would: the key must stop working at once all the same.
 */
describe.each(TEST_DATABASES)('remembered API keys on %s', (kind) => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp(kind);
  });
  afterAll(async () => t?.close());

  const lead = (email: string) => ({ entity: 'lead', fields: { email, first_name: 'Ada' } });
  const postRecord = (key: string, body: object, idempotencyKey?: string) =>
    t.request({
      method: 'POST',
      url: '/api/v1/records',
      key,
      body,
      ...(idempotencyKey ? { headers: { 'idempotency-key': idempotencyKey } } : {}),
    });

  async function newKey(account: TestAccount, body: object = {}): Promise<{ id: string; key: string }> {
    const res = await t.request({
      method: 'POST',
      url: '/api/v1/settings/api-keys',
      key: account.apiKey,
      body: { name: 'remembered', ...body },
    });
    expect(res.statusCode).toBe(201);
    return res.json();
  }

  /** Revokes the key in the database only, as another node would; this node is not told. */
  async function revokeElsewhere(account: TestAccount, keyId: string) {
    await sql`UPDATE api_keys SET revoked_at = now() WHERE account_id = ${account.id} AND id = ${keyId}`.execute(
      t.db,
    );
  }

  async function count(table: 'records' | 'intake_log', account: TestAccount): Promise<number> {
    const result = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM ${sql.table(table)} WHERE account_id = ${account.id}`.execute(t.db);
    return result.rows[0]!.n;
  }

  describe('happy path', () => {
    it('keeps taking in records with a remembered key', async () => {
      const account = await accountWithLeads(t);
      const { key } = await newKey(account);
      for (let i = 0; i < 3; i++) {
        const res = await postRecord(key, lead(`a${i}@x.test`));
        expect(res.statusCode).toBe(201);
      }
      expect(await count('records', account)).toBe(3);
    });
  });

  describe('errors', () => {
    it('applies a strict flag set on this node to the next request at once', async () => {
      const account = await accountWithLeads(t);
      const { id, key } = await newKey(account);
      const body = { entity: 'lead', fields: { email: 'strict@x.test', surprise: 'yes' } };
      const lax = await postRecord(key, body);
      expect(lax.statusCode).toBe(201);
      const patched = await t.request({
        method: 'PATCH',
        url: `/api/v1/settings/api-keys/${id}`,
        key: account.apiKey,
        body: { strict: true },
      });
      expect(patched.statusCode).toBe(200);
      const strict = await postRecord(key, { ...body, fields: { ...body.fields, email: 'strict2@x.test' } });
      expect(strict.statusCode).toBe(422);
    });
  });

  describe('security', () => {
    it('refuses a key revoked by another node at once, writing nothing', async () => {
      const account = await accountWithLeads(t);
      const { id, key } = await newKey(account);
      const first = await postRecord(key, lead('one@x.test'));
      expect(first.statusCode).toBe(201);
      const logged = await count('intake_log', account);
      await revokeElsewhere(account, id);

      const s2 = await postRecord(key, lead('two@x.test'));
      expect(s2.statusCode).toBe(401);
      expect(s2.json()).toEqual({ error: 'unauthorized' });
      expect(await count('records', account)).toBe(1);
      expect(await count('intake_log', account)).toBe(logged);
    });

    it('answers 401, not the body error, to a revoked remembered key with a bad body', async () => {
      const account = await accountWithLeads(t);
      const { id, key } = await newKey(account);
      expect((await postRecord(key, lead('ok@x.test'))).statusCode).toBe(201);
      await revokeElsewhere(account, id);
      const logged = await count('intake_log', account);
      // Fails the route schema (no entity), and fails the entity's rules (no email).
      const schema = await postRecord(key, { fields: {} });
      expect(schema.statusCode).toBe(401);
      const rules = await postRecord(key, { entity: 'lead', fields: { first_name: 'No email' } });
      expect(rules.statusCode).toBe(401);
      expect(await count('intake_log', account)).toBe(logged);
    });

    it('refuses a revoked remembered key on S1 intake, with an idempotency key, and on the update path', async () => {
      const account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
      // Each check gets its own key, remembered and then revoked elsewhere: a refused key is
      // forgotten, so a second request with it would be looked up and refused at the door.
      async function rememberedThenRevoked(warmUp: (key: string) => Promise<void>) {
        const { id, key } = await newKey(account);
        await warmUp(key);
        await revokeElsewhere(account, id);
        return key;
      }
      const plainWarmUp = async (key: string) => {
        const res = await postRecord(key, lead(`${key}@x.test`));
        expect(res.statusCode).toBe(201);
      };
      await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        body: { entity: 'lead', email: 'dup@x.test' },
      });
      const before = await count('records', account);

      const s1Key = await rememberedThenRevoked(plainWarmUp);
      const s1 = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: s1Key,
        body: { entity: 'lead', email: 'new@x.test' },
      });
      expect(s1.statusCode).toBe(401);
      expect(s1.json()).toMatchObject({ status: 'error' });

      // The stored answer of an idempotency key is not handed to a revoked key.
      const replayKey = await rememberedThenRevoked(async (key) => {
        const keyed = await postRecord(key, lead('keyed@x.test'), 'once');
        expect(keyed.statusCode).toBe(201);
      });
      const replay = await postRecord(replayKey, lead('keyed@x.test'), 'once');
      expect(replay.statusCode).toBe(401);

      // A first request with a new idempotency key writes nothing and leaves the key free.
      const freshKey = await rememberedThenRevoked(plainWarmUp);
      const fresh = await postRecord(freshKey, lead('fresh@x.test'), 'fresh');
      expect(fresh.statusCode).toBe(401);
      const retried = await postRecord(account.apiKey, lead('fresh@x.test'), 'fresh');
      expect(retried.statusCode).toBe(201);

      // A duplicate that would update the stored record.
      const updateKey = await rememberedThenRevoked(plainWarmUp);
      const update = await postRecord(updateKey, lead('dup@x.test'));
      expect(update.statusCode).toBe(401);
      // Four warm-ups, the keyed record and the retried one; nothing from a revoked key.
      expect(await count('records', account)).toBe(before + 5);
    });

    it('refuses a revoked remembered key on the transactional path (a create rule)', async () => {
      const account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'create' } });
      const { id, key } = await newKey(account);
      expect((await postRecord(key, lead('c@x.test'))).statusCode).toBe(201);
      await revokeElsewhere(account, id);
      const again = await postRecord(key, lead('c@x.test'));
      expect(again.statusCode).toBe(401);
      expect(await count('records', account)).toBe(1);
    });

    it('refuses a key revoked by another node at once on a record read, also for a record it cannot see', async () => {
      const account = await accountWithLeads(t);
      const other = await accountWithLeads(t);
      const { id, key } = await newKey(account);
      const created = await postRecord(key, lead('read@x.test'));
      expect(created.statusCode).toBe(201);
      const recordId = created.json().id as string;
      const foreign = (await postRecord(other.apiKey, lead('foreign@x.test'))).json().id as string;
      const read = (url: string) => t.request({ method: 'GET', url, key });
      expect((await read(`/api/v1/records/${recordId}`)).statusCode).toBe(200);
      // Another account's record is 404 to a live key, remembered or not.
      expect((await read(`/api/v1/records/${foreign}`)).statusCode).toBe(404);
      await revokeElsewhere(account, id);

      const own = await read(`/api/v1/records/${recordId}`);
      expect(own.statusCode).toBe(401);
      expect(own.json()).toEqual({ error: 'unauthorized' });
      // A revoked key learns nothing: no 404 for another account's record or a malformed id.
      const { key: second, id: secondId } = await newKey(account);
      expect((await postRecord(second, lead('second@x.test'))).statusCode).toBe(201);
      await revokeElsewhere(account, secondId);
      expect(
        (await t.request({ method: 'GET', url: `/api/v1/records/${foreign}`, key: second })).statusCode,
      ).toBe(401);
      const { key: third, id: thirdId } = await newKey(account);
      expect((await postRecord(third, lead('third@x.test'))).statusCode).toBe(201);
      await revokeElsewhere(account, thirdId);
      expect(
        (await t.request({ method: 'GET', url: '/api/v1/records/not-an-id', key: third })).statusCode,
      ).toBe(401);
    });

    it('answers reads that arrive together each on its own: a revoked key refuses only its own', async () => {
      const account = await accountWithLeads(t);
      const live = await newKey(account);
      const revoked = await newKey(account);
      const ids: string[] = [];
      for (const key of [live.key, revoked.key, live.key]) {
        const created = await postRecord(key, lead(`${ids.length}@together.test`));
        expect(created.statusCode).toBe(201);
        ids.push(created.json().id);
      }
      await revokeElsewhere(account, revoked.id);
      const missing = '00000000-0000-4000-8000-000000000000';
      const answers = await Promise.all([
        t.request({ method: 'GET', url: `/api/v1/records/${ids[0]}`, key: live.key }),
        t.request({ method: 'GET', url: `/api/v1/records/${ids[1]}`, key: revoked.key }),
        t.request({ method: 'GET', url: `/api/v1/records/${missing}`, key: live.key }),
        t.request({ method: 'GET', url: `/api/v1/records/${ids[2]}`, key: live.key }),
        t.request({ method: 'GET', url: `/api/v1/records/${ids[1]}`, key: account.apiKey }),
      ]);
      expect(answers.map((answer) => answer.statusCode)).toEqual([200, 401, 404, 200, 200]);
      expect(answers.map((answer) => (answer.statusCode === 200 ? answer.json().id : null))).toEqual([
        ids[0],
        null,
        null,
        ids[2],
        ids[1],
      ]);
    });

    it('refuses a key revoked by another node at once on a note, writing nothing and telling nothing', async () => {
      const account = await accountWithLeads(t);
      const { id, key } = await newKey(account);
      const created = await postRecord(key, lead('noted@x.test'));
      const recordId = created.json().id as string;
      await postRecord(account.apiKey, lead('twice@x.test'));
      await postRecord(account.apiKey, lead('TWICE@x.test'));
      const note = (body: object) => t.request({ method: 'POST', url: '/api/v1/notes', key, body });
      expect((await note({ email: 'noted@x.test', body: 'remembered' })).statusCode).toBe(201);
      await revokeElsewhere(account, id);
      const notes = async () =>
        (
          await sql<{
            n: number;
          }>`SELECT count(*)::int AS n FROM notes WHERE account_id = ${account.id}`.execute(t.db)
        ).rows[0]!.n;
      const before = await notes();
      // By email, by id, a missing match (404 to a live key), several matches (409), an unknown entity.
      const answers = [
        await note({ email: 'noted@x.test', body: 'revoked' }),
        await note({ record: recordId, body: 'revoked' }),
        await note({ email: 'nobody@x.test', body: 'revoked' }),
        await note({ email: 'twice@x.test', body: 'revoked' }),
        await note({ email: 'noted@x.test', entity: 'nothing', body: 'revoked' }),
      ];
      expect(answers.map((answer) => answer.statusCode)).toEqual([401, 401, 401, 401, 401]);
      expect(await notes()).toBe(before);
    });

    it('answers notes that arrive together each on its own: a revoked key refuses only its own', async () => {
      const account = await accountWithLeads(t);
      const live = await newKey(account);
      const revoked = await newKey(account);
      const ids: string[] = [];
      for (const email of ['a@together.test', 'b@together.test', 'dup@together.test', 'DUP@together.test']) {
        ids.push((await postRecord(live.key, lead(email))).json().id);
      }
      expect((await postRecord(revoked.key, lead('c@together.test'))).statusCode).toBe(201);
      await revokeElsewhere(account, revoked.id);
      const note = (key: string, body: object) =>
        t.request({ method: 'POST', url: '/api/v1/notes', key, body });
      const answers = await Promise.all([
        note(live.key, { email: 'A@together.test', body: 'first' }),
        note(revoked.key, { email: 'b@together.test', body: 'refused' }),
        note(live.key, { email: 'nobody@together.test', body: 'no match' }),
        note(live.key, { email: 'dup@together.test', body: 'two matches' }),
        note(live.key, { record: ids[1], body: 'by id', kind: 'call' }),
        note(account.apiKey, { email: 'b@together.test', entity: 'lead', body: 'scoped' }),
      ]);
      expect(answers.map((answer) => answer.statusCode)).toEqual([201, 401, 404, 409, 201, 201]);
      expect(answers[0]!.json()).toMatchObject({ record_id: ids[0], kind: 'general' });
      expect(answers[3]!.json()).toMatchObject({ error: 'ambiguous_match', ids: [ids[2], ids[3]] });
      expect(answers[4]!.json()).toMatchObject({ record_id: ids[1], kind: 'call' });
      expect(answers[5]!.json()).toMatchObject({ record_id: ids[1] });
      const stored = await sql<{ record_id: string; body: string }>`
        SELECT record_id, body FROM notes WHERE account_id = ${account.id} ORDER BY body`.execute(t.db);
      expect(stored.rows).toEqual([
        { record_id: ids[1], body: 'by id' },
        { record_id: ids[0], body: 'first' },
        { record_id: ids[1], body: 'scoped' },
      ]);
      const events = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM record_events WHERE account_id = ${account.id} AND type = 'note_added'`.execute(
        t.db,
      );
      expect(events.rows[0]!.n).toBe(3);
    });

    it('refuses a record read to a remembered key without records:read', async () => {
      const account = await accountWithLeads(t);
      const { key } = await newKey(account, { permissions: ['records:write'] });
      const created = await postRecord(key, lead('writer@x.test'));
      expect(created.statusCode).toBe(201);
      const read = await t.request({ method: 'GET', url: `/api/v1/records/${created.json().id}`, key });
      expect(read.statusCode).toBe(403);
    });

    it('does not take a remembered key on routes that do not check it themselves', async () => {
      const account = await accountWithLeads(t);
      const { id, key } = await newKey(account);
      expect((await postRecord(key, lead('r@x.test'))).statusCode).toBe(201);
      await revokeElsewhere(account, id);
      const read = await t.request({ method: 'GET', url: '/api/v1/records', key });
      expect(read.statusCode).toBe(401);
      const s1Bulk = await t.request({
        method: 'POST',
        url: '/api/leads/bulk',
        key,
        body: { batch: [{ entity: 'lead', email: 'b@x.test' }] },
      });
      expect(s1Bulk.statusCode).toBe(401);
    });

    it('refuses a revoked remembered key on bulk whichever path its entries take, writing nothing', async () => {
      const account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
      const bulk = (key: string, records: unknown[], idempotencyKey?: string) =>
        t.request({
          method: 'POST',
          url: '/api/v1/records/bulk',
          key,
          body: { records },
          ...(idempotencyKey ? { headers: { 'idempotency-key': idempotencyKey } } : {}),
        });
      async function rememberedThenRevoked(warmUp?: (key: string) => Promise<void>) {
        const { id, key } = await newKey(account);
        const warm = await bulk(key, [lead(`${id}@x.test`)]);
        expect(warm.statusCode).toBe(200);
        await warmUp?.(key);
        await revokeElsewhere(account, id);
        return key;
      }
      expect((await postRecord(account.apiKey, lead('dup@x.test'))).statusCode).toBe(201);
      const before = await count('records', account);
      const logged = await count('intake_log', account);

      // Every entry refused before anything is written: 401, not the entries' refusals.
      const refusedKey = await rememberedThenRevoked();
      const refused = await bulk(refusedKey, [{ entity: 'lead', fields: {} }, 'not an object']);
      expect(refused.statusCode).toBe(401);

      // Entries with their own idempotency keys, and a duplicate that would update a record.
      const ownKeysKey = await rememberedThenRevoked();
      const ownKeys = await bulk(ownKeysKey, [
        { ...lead('own@x.test'), idempotency_key: 'own-1' },
        lead('dup@x.test'),
      ]);
      expect(ownKeys.statusCode).toBe(401);

      // The stored answer of the call's Idempotency-Key is not handed to a revoked key.
      const replayKey = await rememberedThenRevoked(async (key) => {
        expect((await bulk(key, [lead('keyed@x.test')], 'bulk-once')).statusCode).toBe(200);
      });
      const replay = await bulk(replayKey, [lead('keyed@x.test')], 'bulk-once');
      expect(replay.statusCode).toBe(401);
      expect(replay.headers['idempotent-replayed']).toBeUndefined();

      // Three warm-ups and the keyed call's record; nothing from a revoked key, nothing logged.
      expect(await count('records', account)).toBe(before + 4);
      expect(await count('intake_log', account)).toBe(logged + 4);
    });
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, LEAD_ENTITY, putEntity } from '../helpers/fixtures.ts';

describe.each(TEST_DATABASES)('notes on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t);
  });
  afterAll(async () => t?.close());

  const create = async (fields: Record<string, unknown>, who = account, entity = 'lead') =>
    (
      await t.request({ method: 'POST', url: '/api/v1/records', key: who.apiKey, body: { entity, fields } })
    ).json().id as string;
  const note = (body: unknown, key = account.apiKey, headers?: Record<string, string>) =>
    t.request({ method: 'POST', url: '/api/v1/notes', key, body, headers });
  const countNotes = async () =>
    Number(
      (
        await t.db
          .selectFrom('notes')
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  describe('happy path', () => {
    it('adds a note by record id, with the API as sender in the history', async () => {
      const id = await create({ email: 'n1@b.co' });
      const response = await note({ record: id, body: 'Called, no answer @sam', kind: 'call' });
      expect(response.statusCode).toBe(201);
      expect(response.json()).toEqual({
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        record_id: id,
        kind: 'call',
        created_at: expect.any(String),
        warnings: [],
      });
      const row = await t.db
        .selectFrom('notes')
        .selectAll()
        .where('id', '=', response.json().id)
        .executeTakeFirstOrThrow();
      expect(row).toMatchObject({
        body: 'Called, no answer @sam',
        sender: 'api',
        sender_name: 'Initial key',
      });
      const lead = (await t.request({ method: 'GET', url: `/api/leads/${id}`, key: account.apiKey })).json();
      expect(lead.events[0]).toMatchObject({ type: 'note_added', message: 'Called, no answer @sam' });
    });

    it('finds the record by email in any case, optionally within one entity; kind defaults to general', async () => {
      const id = await create({ email: 'Mixed.Case@B.co' });
      const response = await note({ email: 'mixed.case@b.CO', body: 'hi' });
      expect(response.json()).toMatchObject({ record_id: id, kind: 'general' });
      expect((await note({ email: 'mixed.case@b.co', entity: 'lead', body: 'scoped' })).statusCode).toBe(201);
    });

    it('finds records by email whether a unique rule keys them by that email alone or not, on both paths', async () => {
      // A record under a unique rule on its email alone is indexed by that rule's key only
      // (migration 0034); the others by their email. Notes without a key take the grouped
      // statement, notes with one the single look-up: both must see both kinds.
      const owner = await accountWithLeads(t);
      const contact = {
        ...LEAD_ENTITY,
        name: 'Contact',
        duplicate_rule: { match: ['email'], action: 'update' },
      };
      await putEntity(t, owner, 'contact', contact);
      await putEntity(t, owner, 'deal', {
        ...LEAD_ENTITY,
        name: 'Deal',
        duplicate_rule: { match: ['email', 'company'], action: 'ignore' },
      });
      const byRule = await create({ email: 'Both@b.co' }, owner, 'contact');
      const stored = await t.db
        .selectFrom('records')
        .select(['dedupe_key', 'email_lc', 'dedupe_unique'])
        .where('id', '=', byRule)
        .executeTakeFirstOrThrow();
      expect(stored).toEqual({ dedupe_key: 'both@b.co', email_lc: 'both@b.co', dedupe_unique: true });
      const send = (body: Record<string, unknown>, keyed: string | null) =>
        note(keyed === null ? body : { ...body, idempotency_key: keyed }, owner.apiKey);
      for (const keyed of [null, 'only-one']) {
        const alone = await send({ email: 'both@B.co', body: 'one' }, keyed);
        expect(alone.statusCode).toBe(201);
        expect(alone.json().record_id).toBe(byRule);
      }
      const byOtherRule = await create({ email: 'both@b.co', company: 'Acme' }, owner, 'deal');
      const noRule = await create({ email: 'BOTH@b.co' }, owner, 'lead');
      for (const keyed of [null, 'three']) {
        const all = await send({ email: 'both@b.co', body: 'which?' }, keyed);
        expect(all.statusCode).toBe(409);
        expect(all.json().ids.sort()).toEqual([byRule, byOtherRule, noRule].sort());
        for (const [entity, id] of [
          ['contact', byRule],
          ['deal', byOtherRule],
          ['lead', noRule],
        ] as const) {
          const scoped = await send(
            { email: 'both@b.co', entity, body: 'this one' },
            keyed && `${keyed}-${entity}`,
          );
          expect(scoped.statusCode).toBe(201);
          expect(scoped.json().record_id).toBe(id);
        }
      }
    });

    it('adds one note per idempotency key, by body or header', async () => {
      const id = await create({ email: 'idem-note@b.co' });
      const first = await note({ record: id, body: 'once', idempotency_key: 'n-1' });
      const again = await note({ record: id, body: 'once', idempotency_key: 'n-1' });
      expect(again.statusCode).toBe(200);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.json().id).toBe(first.json().id);
      const viaHeader = await note({ record: id, body: 'twice' }, account.apiKey, {
        'idempotency-key': 'n-2',
      });
      const viaHeaderAgain = await note({ record: id, body: 'twice' }, account.apiKey, {
        'idempotency-key': 'n-2',
      });
      expect(viaHeaderAgain.json().id).toBe(viaHeader.json().id);
      // The same key in the header and in the body is one key; key order in the body is no change.
      const sameInBody = await note({ body: 'twice', idempotency_key: 'n-2', record: id });
      expect(sameInBody.json().id).toBe(viaHeader.json().id);
      const rows = await t.db.selectFrom('notes').select('id').where('record_id', '=', id).execute();
      expect(rows).toHaveLength(2);
    });

    it('takes a null idempotency_key as no key, the header then applying (decisions §4)', async () => {
      const id = await create({ email: 'null-key@b.co' });
      const first = await note({ record: id, body: 'unkeyed', idempotency_key: null });
      expect(first.statusCode, first.body).toBe(201);
      const second = await note({ record: id, body: 'unkeyed', idempotency_key: null });
      expect(second.statusCode).toBe(201);
      expect(second.json().id).not.toBe(first.json().id);
      const headed = await note({ record: id, body: 'keyed', idempotency_key: null }, account.apiKey, {
        'idempotency-key': 'n-null',
      });
      const again = await note({ record: id, body: 'keyed' }, account.apiKey, {
        'idempotency-key': 'n-null',
      });
      expect(again.statusCode).toBe(200);
      expect(again.json().id).toBe(headed.json().id);
    });

    it('answers 422 idempotency_key_reused for the same key with another request', async () => {
      const id = await create({ email: 'reused-note@b.co' });
      const other = await create({ email: 'reused-other@b.co' });
      expect((await note({ record: id, body: 'first', idempotency_key: 'n-3' })).statusCode).toBe(201);
      for (const changed of [
        { record: id, body: 'second' },
        { record: other, body: 'first' },
        { record: id, body: 'first', kind: 'call' },
        { email: 'reused-note@b.co', body: 'first' },
      ]) {
        const answer = await note({ ...changed, idempotency_key: 'n-3' });
        expect(answer.statusCode, JSON.stringify(changed)).toBe(422);
        expect(answer.json()).toEqual({ error: 'idempotency_key_reused' });
      }
      // `general` is the default kind: naming it is the same request.
      const same = await note({ record: id, body: 'first', kind: 'general', idempotency_key: 'n-3' });
      expect(same.statusCode).toBe(200);
      const rows = await t.db
        .selectFrom('notes')
        .select('id')
        .where('record_id', 'in', [id, other])
        .execute();
      expect(rows).toHaveLength(1);
    });
  });

  describe('errors', () => {
    it('answers 404 when nothing matches and never creates a record', async () => {
      const records = Number(
        (
          await t.db
            .selectFrom('records')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
      const missing = await note({ email: 'nobody@b.co', body: 'x' });
      expect(missing.statusCode).toBe(404);
      expect((await note({ record: '00000000-0000-4000-8000-000000000000', body: 'x' })).statusCode).toBe(
        404,
      );
      const after = Number(
        (
          await t.db
            .selectFrom('records')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
      expect(after).toBe(records);
    });

    it('answers 409 with the ids when several records match', async () => {
      const a = await create({ email: 'twice@b.co' });
      const b = await create({ email: 'TWICE@b.co' });
      const before = await countNotes();
      const response = await note({ email: 'twice@b.co', body: 'which one?' });
      expect(response.statusCode).toBe(409);
      expect(response.json().error).toBe('ambiguous_match');
      expect(response.json().ids.sort()).toEqual([a, b].sort());
      expect(await countNotes()).toBe(before);
    });

    it('refuses an unknown kind, an empty body and neither record nor email', async () => {
      const id = await create({ email: 'kinds@b.co' });
      expect((await note({ record: id, body: 'x', kind: 'sms' })).statusCode).toBe(422);
      expect((await note({ record: id, body: '' })).statusCode).toBe(422);
      expect((await note({ body: 'x' })).statusCode).toBe(422);
    });

    it('refuses a blank body as required, as a blank name is, and adds nothing', async () => {
      const id = await create({ email: 'blank-note@b.co' });
      const before = await countNotes();
      for (const body of ['', '   ', '\n\t', '\u200b']) {
        const answer = await note({ record: id, body });
        expect(answer.statusCode, JSON.stringify(body)).toBe(422);
        expect(answer.json().details).toEqual([
          { key: 'body', reason: 'required', message: 'must hold a character other than blanks' },
        ]);
      }
      // Blanks around text are the note's own.
      expect((await note({ record: id, body: '  ok  ' })).statusCode).toBe(201);
      expect(await countNotes()).toBe(before + 1);
    });

    it('refuses record and email together, keyed or not, and adds nothing', async () => {
      const id = await create({ email: 'both@b.co' });
      await create({ email: 'both-other@b.co' });
      const before = await countNotes();
      for (const extra of [{}, { idempotency_key: 'n-both' }]) {
        for (const email of ['both-other@b.co', 'both@b.co']) {
          const answer = await note({ record: id, email, body: 'which?', ...extra });
          expect(answer.statusCode).toBe(422);
          expect(answer.json()).toEqual({
            error: 'validation_failed',
            details: [
              { key: 'email', reason: 'not_allowed', message: 'give either record or email, not both' },
            ],
          });
        }
      }
      expect(await countNotes()).toBe(before);
    });

    it('takes entity as a limit of the look-up by id too: a record of another entity is 404', async () => {
      await putEntity(t, account, 'tenant', {
        name: 'Tenant',
        fields: [{ key: 'email', label: 'Email', type: 'text', role: 'email' }],
      });
      const tenant = await create({ email: 'tenant@b.co' }, account, 'tenant');
      const before = await countNotes();
      for (const extra of [{}, { idempotency_key: 'n-entity' }]) {
        const answer = await note({ record: tenant, entity: 'lead', body: 'wrong entity', ...extra });
        expect(answer.statusCode, JSON.stringify(extra)).toBe(404);
        expect(answer.json()).toMatchObject({ error: 'record_not_found' });
        expect((await note({ record: tenant, entity: 'nothing', body: 'x', ...extra })).json().error).toBe(
          'unknown_entity',
        );
      }
      expect(await countNotes()).toBe(before);
      const right = await note({ record: tenant, entity: 'tenant', body: 'right entity' });
      expect(right.statusCode).toBe(201);
      expect(right.json().record_id).toBe(tenant);
      const keyed = await note({
        record: tenant,
        entity: 'tenant',
        body: 'keyed',
        idempotency_key: 'n-ent2',
      });
      expect(keyed.statusCode).toBe(201);
    });

    it('refuses an empty entity instead of looking everywhere', async () => {
      const id = await create({ email: 'empty-entity@b.co' });
      const before = await countNotes();
      for (const locator of [{ email: 'empty-entity@b.co' }, { record: id }]) {
        const answer = await note({ ...locator, entity: '', body: 'x' });
        expect(answer.statusCode).toBe(422);
        expect(answer.json().details).toEqual([expect.objectContaining({ key: 'entity' })]);
      }
      expect(await countNotes()).toBe(before);
    });
  });

  describe('security', () => {
    it('takes API keys only: source and record tokens are refused, and notes:write is needed', async () => {
      const id = await create({ email: 'sec@b.co' });
      const source = (
        await t.request({
          method: 'POST',
          url: '/api/v1/settings/sources',
          key: account.apiKey,
          body: { name: 'Notes source' },
        })
      ).json();
      expect((await note({ record: id, body: 'x' }, source.token)).statusCode).toBe(401);
      const { token } = (
        await t.request({
          method: 'POST',
          url: `/api/v1/records/${id}/tokens`,
          key: account.apiKey,
          body: { fields: ['phone'] },
        })
      ).json();
      expect((await note({ record: id, body: 'x' }, token)).statusCode).toBe(401);
      const reader = (
        await t.request({
          method: 'POST',
          url: '/api/v1/settings/api-keys',
          key: account.apiKey,
          body: { name: 'r', permissions: ['records:read'] },
        })
      ).json();
      expect((await note({ record: id, body: 'x' }, reader.key)).statusCode).toBe(403);
    });

    it("never reaches another account's record, by id or by email", async () => {
      const other = await accountWithLeads(t);
      const theirs = await create({ email: 'private@b.co' }, other);
      expect((await note({ record: theirs, body: 'x' })).statusCode).toBe(404);
      expect((await note({ email: 'private@b.co', body: 'x' })).statusCode).toBe(404);
    });
  });
});

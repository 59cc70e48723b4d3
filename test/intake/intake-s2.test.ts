import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, historyOf, LEAD_ENTITY, putEntity } from '../helpers/fixtures.ts';

describe.each(TEST_DATABASES)('S2 intake: POST /api/v1/records on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t);
  });
  afterAll(async () => t?.close());

  const intake = (body: unknown, key = account.apiKey) =>
    t.request({ method: 'POST', url: '/api/v1/records', key, body });
  const stored = (id: string) =>
    t.db.selectFrom('records').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

  describe('happy path', () => {
    it('creates a record with typed values, a name from roles, the first stage and a lead_created event', async () => {
      const response = await intake({
        entity: 'lead',
        fields: {
          first_name: 'Ada',
          last_name: 'Lovelace',
          email: ' Ada@Example.com ',
          budget: '1250.50',
          rooms: 4,
          consent: 'yes',
          interest: 'heat PUMP',
          topics: 'Price, Funding',
          birthday: '1815-12-10',
          callback_at: '2026-12-01T10:00:00+01:00',
        },
      });
      expect(response.statusCode).toBe(201);
      expect(response.json()).toEqual({
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        entity: 'lead',
        created: true,
        updated: false,
        warnings: [],
      });
      const record = await stored(response.json().id);
      expect(record.fields).toEqual({
        first_name: 'Ada',
        last_name: 'Lovelace',
        email: 'Ada@Example.com',
        budget: 1250.5,
        rooms: 4,
        consent: true,
        interest: 'Heat pump',
        topics: ['Price', 'Funding'],
        birthday: '1815-12-10',
        callback_at: '2026-12-01T09:00:00.000Z',
      });
      expect(record.name).toBe('Ada Lovelace');
      expect(record.source).toBe('api');
      const read = await t.request({
        method: 'GET',
        url: `/api/v1/records/${record.id}`,
        key: account.apiKey,
      });
      expect(read.json().crm).toEqual({
        pipeline: 'Sales',
        stage: 'New',
        entered_at: read.json().created_at,
      });
      expect(await historyOf(t, account.apiKey, record.id)).toEqual(['lead_created']);
      expect(record.stage_entered_at).toEqual(record.created_at);
      // The creation and the first stage are facts of the record row, not history rows.
      const events = await t.db
        .selectFrom('record_events')
        .select('id')
        .where('record_id', '=', record.id)
        .execute();
      const stays = await t.db
        .selectFrom('stage_history')
        .select('id')
        .where('record_id', '=', record.id)
        .execute();
      expect([...events, ...stays]).toEqual([]);
    });

    it('matches submitted names against the entity as it is now: a renamed label counts at once', async () => {
      const own = await accountWithLeads(t);
      const send = (fields: object) =>
        t.request({
          method: 'POST',
          url: '/api/v1/records',
          key: own.apiKey,
          body: { entity: 'lead', fields },
        });
      const before = await send({ email: 'label1@b.co', Vorname: 'Ann' });
      expect(before.json().warnings).toEqual([{ key: 'Vorname', reason: 'unmapped' }]);
      await putEntity(t, own, 'lead', {
        ...LEAD_ENTITY,
        fields: LEAD_ENTITY.fields.map((field) =>
          field.key === 'first_name' ? { ...field, label: 'Vorname' } : field,
        ),
      });
      const after = await send({ email: 'label2@b.co', Vorname: 'Bea' });
      expect(after.json().warnings).toEqual([]);
      expect((await stored(after.json().id)).fields).toMatchObject({ first_name: 'Bea' });
    });

    it('reads top-level keys as field names and stores meta origin keys and source', async () => {
      const response = await intake({
        entity: 'lead',
        fields: { email: 'top@b.co' },
        first_name: 'Top',
        utm_source: 'newsletter',
        utm_medium: 'email',
        meta: {
          source: 'Landing page',
          utm_campaign: 'spring',
          gclid: 'g-1',
          referrer: 'https://ref.example/',
        },
      });
      expect(response.statusCode).toBe(201);
      // utm_source is a field of the entity, utm_medium is not: it is set aside.
      expect(response.json().warnings).toEqual([{ key: 'utm_medium', reason: 'unmapped' }]);
      const record = await stored(response.json().id);
      expect(record.fields).toMatchObject({ email: 'top@b.co', first_name: 'Top', utm_source: 'newsletter' });
      expect(record.origin).toEqual({
        utm_campaign: 'spring',
        gclid: 'g-1',
        referrer: 'https://ref.example/',
      });
      expect(record.source).toBe('Landing page');
    });

    it('stores the note as an internal note with the key name as sender', async () => {
      const response = await intake({
        entity: 'lead',
        fields: { email: 'note@b.co' },
        note: 'Wants a call @bob',
      });
      const notes = await t.db
        .selectFrom('notes')
        .selectAll()
        .where('record_id', '=', response.json().id)
        .execute();
      expect(notes).toHaveLength(1);
      expect(notes[0]).toMatchObject({
        body: 'Wants a call @bob',
        sender: 'api',
        sender_name: 'Initial key',
      });
    });
  });

  describe('warnings', () => {
    it('sets aside unknown names and unknown meta keys as unmapped', async () => {
      const response = await intake({
        entity: 'lead',
        fields: { email: 'warn@b.co', shoe_size: 44 },
        favourite_colour: 'blue',
        meta: { campaign_owner: 'x' },
      });
      expect(response.statusCode).toBe(201);
      expect(response.json().warnings).toEqual(
        expect.arrayContaining([
          { key: 'shoe_size', reason: 'unmapped' },
          { key: 'favourite_colour', reason: 'unmapped' },
          { key: 'meta.campaign_owner', reason: 'unmapped' },
        ]),
      );
    });

    it('keeps one value of a field two names give, the field key’s else the first, and sets the other aside with a warning', async () => {
      const response = await intake({
        entity: 'lead',
        fields: { 'E-Mail Address': 'label@b.co', email: 'key@b.co', company: 'Alpha', Company: 'Beta' },
        'First name': 'Top',
        first_name: 'Field',
      });
      expect(response.statusCode).toBe(201);
      expect(response.json().warnings).toEqual([
        expect.objectContaining({ key: 'E-Mail Address', reason: 'unmapped' }),
        expect.objectContaining({ key: 'Company', reason: 'unmapped' }),
        expect.objectContaining({ key: 'First name', reason: 'unmapped' }),
      ]);
      expect(response.json().warnings[1].message).toContain('company');
      expect((await stored(response.json().id)).fields).toMatchObject({
        email: 'key@b.co',
        company: 'Alpha',
        first_name: 'Field',
      });
      // One name in `fields` and at the top level: the one in `fields` is kept.
      const both = await intake({ entity: 'lead', fields: { email: 'inner@b.co' }, email: 'top@b.co' });
      expect(both.json().warnings).toEqual([expect.objectContaining({ key: 'email', reason: 'unmapped' })]);
      expect(both.json().warnings[0].message).toContain('twice');
      expect((await stored(both.json().id)).email_lc).toBe('inner@b.co');
    });

    it('ignores module nodes of modules the account lacks, with a module_not_enabled warning each', async () => {
      const response = await intake({
        entity: 'lead',
        fields: { email: 'mod@b.co' },
        crm: { stage: 'Won' },
        booking: { title: 'Call' },
        distribution: {},
      });
      expect(response.statusCode).toBe(201);
      const reasons = response
        .json()
        .warnings.map((w: { key: string; reason: string }) => `${w.key}:${w.reason}`);
      expect(reasons.sort()).toEqual([
        'booking:module_not_enabled',
        'crm:module_not_enabled',
        'distribution:module_not_enabled',
      ]);
      const read = await t.request({
        method: 'GET',
        url: `/api/v1/records/${response.json().id}`,
        key: account.apiKey,
      });
      expect(read.json().crm.stage).toBe('New');
    });

    it('ignores such a node whatever it holds, alone, in bulk and through a source token', async () => {
      const malformed = { crm: { pipeline: 5 }, booking: 'junk', distribution: null };
      const expected = [
        { key: 'crm', reason: 'module_not_enabled', message: 'the crm module is not enabled' },
        { key: 'booking', reason: 'module_not_enabled', message: 'the booking module is not enabled' },
        {
          key: 'distribution',
          reason: 'module_not_enabled',
          message: 'the distribution module is not enabled',
        },
      ];
      const alone = await intake({ entity: 'lead', fields: { email: 'junk1@b.co' }, ...malformed });
      expect(alone.statusCode).toBe(201);
      expect(alone.json().warnings).toEqual(expected);
      const bulk = await t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key: account.apiKey,
        body: { records: [{ entity: 'lead', fields: { email: 'junk2@b.co' }, ...malformed }] },
      });
      expect(bulk.json().results[0]).toMatchObject({ created: true, warnings: expected });
      const source = (
        await t.request({
          method: 'POST',
          url: '/api/v1/settings/sources',
          key: account.apiKey,
          body: { name: 'Junk form' },
        })
      ).json();
      const viaToken = await t.request({
        method: 'POST',
        url: `/api/v1/in/${source.token}`,
        body: { entity: 'lead', fields: { email: 'junk3@b.co' }, ...malformed },
      });
      expect(viaToken.statusCode).toBe(201);
      expect(viaToken.json().warnings).toEqual(expected);
    });

    it('adds no blank note and says so with a warning, alone and in bulk', async () => {
      for (const [index, note] of ['', '   ', '\n', '\u200b'].entries()) {
        const response = await intake({ entity: 'lead', fields: { email: `blank-note${index}@b.co` }, note });
        expect(response.statusCode, JSON.stringify(note)).toBe(201);
        expect(response.json().warnings).toEqual([
          { key: 'note', reason: 'blank', message: 'the note holds no text: no note was added' },
        ]);
        const notes = await t.db
          .selectFrom('notes')
          .select('id')
          .where('record_id', '=', response.json().id)
          .execute();
        expect(notes).toHaveLength(0);
      }
      const bulk = await t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key: account.apiKey,
        body: {
          records: [
            { entity: 'lead', fields: { email: 'blank-bulk@b.co' }, note: ' ' },
            { entity: 'lead', fields: { email: 'text-bulk@b.co' }, note: ' text ' },
          ],
        },
      });
      expect(bulk.json().results.map((r: { warnings: unknown[] }) => r.warnings)).toEqual([
        [expect.objectContaining({ key: 'note', reason: 'blank' })],
        [],
      ]);
    });

    it('acts on the booking and distribution nodes of an account with the modules', async () => {
      const booked = await accountWithLeads(t, { modules: ['crm', 'booking', 'distribution'] });
      const response = await intake(
        { entity: 'lead', fields: { email: 'nodes@b.co' }, booking: { title: 'Call' }, distribution: {} },
        booked.apiKey,
      );
      expect(response.statusCode).toBe(201);
      const reasons = response
        .json()
        .warnings.map((w: { key: string; reason: string }) => `${w.key}:${w.reason}`);
      // Without a calendar the booking node is a no_calendar warning (test/booking covers the rest),
      // without a distribution the distribution node a no_distribution warning.
      expect(reasons.sort()).toEqual(['booking:no_calendar', 'distribution:no_distribution']);
      expect(response.json()).not.toHaveProperty('distribution');
    });

    it('with the crm module, places the record in the named stage and refuses an unknown one', async () => {
      const crm = await accountWithLeads(t, { modules: ['crm'] });
      const placed = await intake(
        { entity: 'lead', fields: { email: 'crm@b.co' }, crm: { stage: 'Contacted' } },
        crm.apiKey,
      );
      expect(placed.statusCode).toBe(201);
      const read = await t.request({
        method: 'GET',
        url: `/api/v1/records/${placed.json().id}`,
        key: crm.apiKey,
      });
      expect(read.json().crm).toEqual({
        pipeline: 'Sales',
        stage: 'Contacted',
        entered_at: read.json().created_at,
      });
      const unknown = await intake(
        { entity: 'lead', fields: { email: 'crm2@b.co' }, crm: { stage: 'Nope' } },
        crm.apiKey,
      );
      expect(unknown.statusCode).toBe(422);
      expect(unknown.json().details[0]).toMatchObject({ key: 'crm.stage', reason: 'not_allowed' });
    });
  });

  describe('errors', () => {
    it('needs fields, or values as top-level keys: a handover with neither is 422', async () => {
      await putEntity(t, account, 'loose', {
        name: 'Loose',
        fields: [{ key: 'topic', label: 'Topic', type: 'text' }],
      });
      for (const body of [{ entity: 'loose' }, { entity: 'loose', meta: { source: 'web' }, note: 'hi' }]) {
        const refused = await intake(body);
        expect(refused.statusCode, JSON.stringify(body)).toBe(422);
        expect(refused.json()).toEqual({
          error: 'validation_failed',
          details: [{ key: 'fields', reason: 'required', message: 'fields is required' }],
        });
      }
      const bulk = await t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key: account.apiKey,
        body: {
          records: [{ entity: 'loose' }, { entity: 'loose', fields: {} }, { entity: 'loose', topic: 'x' }],
        },
      });
      expect(
        bulk
          .json()
          .results.map((result: { error?: string; created?: boolean }) => result.error ?? result.created),
      ).toEqual(['validation_failed', true, true]);
    });

    it.each([
      ['a missing required field', { first_name: 'No email' }, 'email', 'required'],
      [
        'a select value outside the options',
        { email: 's@b.co', interest: 'Wind' },
        'interest',
        'not_allowed',
      ],
      ['an unreadable number', { email: 'n@b.co', budget: 'lots' }, 'budget', 'invalid_type'],
      ['a fraction for an integer', { email: 'i@b.co', rooms: 2.5 }, 'rooms', 'invalid_format'],
      ['an unreadable boolean', { email: 'b@b.co', consent: 'perhaps' }, 'consent', 'invalid_type'],
      ['an impossible date', { email: 'd@b.co', birthday: '2024-02-30' }, 'birthday', 'invalid_format'],
      [
        'a time on an impossible date (no rolling over to March)',
        { email: 't@b.co', callback_at: '2026-02-30T10:00:00Z' },
        'callback_at',
        'invalid_format',
      ],
      [
        'a time on the 29th of February of a year without it',
        { email: 'l@b.co', callback_at: '2026-02-29T10:00:00+01:00' },
        'callback_at',
        'invalid_format',
      ],
      ['a malformed email', { email: 'not-an-email' }, 'email', 'invalid_format'],
    ])('answers 422 validation_failed for %s', async (_label, fields, key, reason) => {
      const before = await t.db
        .selectFrom('records')
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow();
      const response = await intake({ entity: 'lead', fields });
      expect(response.statusCode).toBe(422);
      expect(response.json().error).toBe('validation_failed');
      expect(response.json().details).toContainEqual(
        expect.objectContaining({ key, reason, message: expect.any(String) }),
      );
      const after = await t.db
        .selectFrom('records')
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow();
      expect(Number(after.n)).toBe(Number(before.n));
    });

    it('refuses a name longer than 100 characters, in fields, at the top level and on PATCH', async () => {
      const long = 'n'.repeat(101);
      const answers = [
        await intake({ entity: 'lead', fields: { email: 'long1@b.co', [long]: 'x' } }),
        await intake({ entity: 'lead', fields: { email: 'long2@b.co' }, [long]: 'x' }),
      ];
      const created = await intake({
        entity: 'lead',
        fields: { email: 'long3@b.co', ['m'.repeat(100)]: 'x' },
      });
      expect(created.statusCode).toBe(201);
      expect(created.json().warnings).toEqual([{ key: 'm'.repeat(100), reason: 'unmapped' }]);
      answers.push(
        await t.request({
          method: 'PATCH',
          url: `/api/v1/records/${created.json().id}`,
          key: account.apiKey,
          body: { fields: { [long]: 'x' } },
        }),
      );
      for (const answer of answers) {
        expect(answer.statusCode).toBe(422);
        expect(answer.json().details).toEqual([
          {
            key: expect.stringMatching(/^(fields\.)?n{101}$/),
            reason: 'out_of_range',
            message: 'the name must NOT have more than 100 characters',
          },
        ]);
      }
    });

    it('warns of a key the crm node or a document item does not take, alone, in bulk and through a source token; a strict key refuses it', async () => {
      const crm = await accountWithLeads(t, { modules: ['crm'] });
      const source = (
        await t.request({
          method: 'POST',
          url: '/api/v1/settings/sources',
          key: crm.apiKey,
          body: { name: 'Open nodes form' },
        })
      ).json();
      const strict = (
        await t.request({
          method: 'POST',
          url: '/api/v1/settings/api-keys',
          key: crm.apiKey,
          body: { name: 'Strict nodes', strict: true },
        })
      ).json().key;
      const cases: [object, string][] = [
        [{ crm: { stage: 'Contacted', stgae: 'Won' } }, 'crm.stgae'],
        // A closed local port: the fetch fails at once, and no traffic leaves the machine.
        [{ documents: [{ url: 'http://127.0.0.1:9/a.pdf', feld: 'many' }] }, 'documents.0.feld'],
      ];
      for (const [index, [node, key]] of cases.entries()) {
        const bodyOf = (way: string) => ({
          entity: 'lead',
          fields: { email: `open${index}-${way}@b.co` },
          ...node,
        });
        const warning = { key, reason: 'unmapped' };
        const alone = await intake(bodyOf('alone'), crm.apiKey);
        expect(alone.statusCode, key).toBe(201);
        expect(alone.json().warnings, key).toContainEqual(warning);
        const bulk = await t.request({
          method: 'POST',
          url: '/api/v1/records/bulk',
          key: crm.apiKey,
          body: { records: [bodyOf('bulk')] },
        });
        expect(bulk.json().results[0].created, key).toBe(true);
        expect(bulk.json().results[0].warnings, key).toContainEqual(warning);
        const viaToken = await t.request({
          method: 'POST',
          url: `/api/v1/in/${source.token}`,
          body: bodyOf('token'),
        });
        expect(viaToken.statusCode, key).toBe(201);
        expect(viaToken.json().warnings, key).toContainEqual(warning);
        const refused = await intake(bodyOf('strict'), strict);
        expect(refused.statusCode, key).toBe(422);
        expect(refused.json().details, key).toEqual([{ ...warning, message: `${key} is not a known key` }]);
        const stored = await t.db
          .selectFrom('records')
          .select('id')
          .where('email_lc', '=', `open${index}-strict@b.co`)
          .execute();
        expect(stored, key).toHaveLength(0);
      }
      // The crm node's known keys are still acted on beside the unknown one.
      const placed = await intake(
        { entity: 'lead', fields: { email: 'open-placed@b.co' }, crm: { stage: 'Contacted', stgae: 'Won' } },
        crm.apiKey,
      );
      const read = await t.request({
        method: 'GET',
        url: `/api/v1/records/${placed.json().id}`,
        key: crm.apiKey,
      });
      expect(read.json().crm.stage).toBe('Contacted');
    });

    it('answers 404 unknown_entity for an entity the account does not have', async () => {
      const response = await intake({ entity: 'house', fields: { email: 'h@b.co' } });
      expect(response.statusCode).toBe(404);
      expect(response.json()).toEqual({ error: 'unknown_entity' });
    });

    it('refuses unknown fields with a strict key and creates nothing', async () => {
      const strict = (
        await t.request({
          method: 'POST',
          url: '/api/v1/settings/api-keys',
          key: account.apiKey,
          body: { name: 'Strict', strict: true },
        })
      ).json().key;
      const refused = await intake(
        { entity: 'lead', fields: { email: 'strict@b.co', shoe_size: 44 } },
        strict,
      );
      expect(refused.statusCode).toBe(422);
      expect(refused.json().details).toContainEqual(
        expect.objectContaining({ key: 'shoe_size', reason: 'unmapped' }),
      );
      const none = await t.db
        .selectFrom('records')
        .select('id')
        .where('email_lc', '=', 'strict@b.co')
        .execute();
      expect(none).toHaveLength(0);
      expect((await intake({ entity: 'lead', fields: { email: 'strict@b.co' } }, strict)).statusCode).toBe(
        201,
      );
      // Two names of one field are refused too: one value would be set aside.
      const twice = await intake(
        { entity: 'lead', fields: { email: 'strict-twice@b.co', Company: 'A', company: 'B' } },
        strict,
      );
      expect(twice.statusCode).toBe(422);
      expect(twice.json().details).toEqual([expect.objectContaining({ key: 'Company', reason: 'unmapped' })]);
      // Unknown keys in `meta` are refused too; known ones are taken.
      const metaRefused = await intake(
        { entity: 'lead', fields: { email: 'strict-meta@b.co' }, meta: { bogus: 1, utm_source: 'x' } },
        strict,
      );
      expect(metaRefused.statusCode).toBe(422);
      expect(metaRefused.json().details).toEqual([
        expect.objectContaining({ key: 'meta.bogus', reason: 'unmapped' }),
      ]);
      const metaKnown = await intake(
        { entity: 'lead', fields: { email: 'strict-meta@b.co' }, meta: { utm_source: 'x' } },
        strict,
      );
      expect(metaKnown.statusCode).toBe(201);
      expect(metaKnown.json().warnings).toEqual([]);
    });
  });

  describe('security', () => {
    it("treats another account's entity as unknown", async () => {
      const other = await accountWithLeads(t);
      await t.request({
        method: 'PUT',
        url: '/api/v1/settings/entities/secret',
        key: other.apiKey,
        body: { name: 'Secret', fields: [] },
      });
      expect((await intake({ entity: 'secret', fields: {} })).statusCode).toBe(404);
    });

    it('needs the records:write permission', async () => {
      const reader = (
        await t.request({
          method: 'POST',
          url: '/api/v1/settings/api-keys',
          key: account.apiKey,
          body: { name: 'Reader', permissions: ['records:read'] },
        })
      ).json().key;
      const response = await intake({ entity: 'lead', fields: { email: 'r@b.co' } }, reader);
      expect(response.statusCode).toBe(403);
      expect(response.json()).toEqual({ error: 'forbidden' });
    });

    it('needs the permission of each module node a key sends, on S2, bulk and S1', async () => {
      const modular = await accountWithLeads(t, { modules: ['crm', 'booking', 'distribution'] });
      const keyWith = async (permissions: string[]) =>
        (
          await t.request({
            method: 'POST',
            url: '/api/v1/settings/api-keys',
            key: modular.apiKey,
            body: { name: permissions.join(' '), permissions },
          })
        ).json().key as string;
      const writer = await keyWith(['records:write']);
      const count = async (email: string) =>
        (await t.db.selectFrom('records').select('id').where('email_lc', '=', email).execute()).length;
      for (const node of [{ crm: { stage: 'Won' } }, { distribution: {} }, { booking: { title: 'Call' } }]) {
        const refused = await intake({ entity: 'lead', fields: { email: 'node@b.co' }, ...node }, writer);
        expect([Object.keys(node)[0], refused.statusCode, refused.json()]).toEqual([
          Object.keys(node)[0],
          403,
          { error: 'forbidden' },
        ]);
      }
      expect(await count('node@b.co')).toBe(0);
      // Bulk: the entry with a node is refused, the others are taken.
      const bulk = await t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key: writer,
        body: {
          records: [
            { entity: 'lead', fields: { email: 'bulk-plain@b.co' } },
            { entity: 'lead', fields: { email: 'bulk-node@b.co' }, crm: { stage: 'Won' } },
          ],
        },
      });
      expect(bulk.json()).toMatchObject({
        accepted: 1,
        rejected: 1,
        results: [{ created: true }, { error: 'forbidden' }],
      });
      // S1: a status names a stage, which needs crm.
      const s1 = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: writer,
        body: { entity: 'lead', email: 's1-node@b.co', 'status:Sales': 'Won' },
      });
      expect(s1.statusCode).toBe(403);
      expect(s1.json()).toMatchObject({ status: 'error' });
      expect(await count('s1-node@b.co')).toBe(0);
      // S1 bulk is all or nothing: one lead with a node refuses the call, 403 (not a 500).
      for (const node of [{ 'status:Sales': 'Won' }, { booking: true }]) {
        const s1Bulk = await t.request({
          method: 'POST',
          url: '/api/leads/bulk',
          key: writer,
          body: {
            entity: 'lead',
            batch: [{ email: 's1-bulk-plain@b.co' }, { email: 's1-bulk-node@b.co', ...node }],
          },
        });
        expect([Object.keys(node)[0], s1Bulk.statusCode, s1Bulk.json().status]).toEqual([
          Object.keys(node)[0],
          403,
          'error',
        ]);
      }
      expect(await count('s1-bulk-plain@b.co')).toBe(0);
      // With the permission the node acts.
      const crmWriter = await keyWith(['records:write', 'crm']);
      const placed = await intake(
        { entity: 'lead', fields: { email: 'placed@b.co' }, crm: { stage: 'Won' } },
        crmWriter,
      );
      expect(placed.statusCode).toBe(201);
      const read = await t.request({
        method: 'GET',
        url: `/api/v1/records/${placed.json().id}`,
        key: modular.apiKey,
      });
      expect(read.json().crm).toMatchObject({ stage: 'Won' });
    });
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

describe.each(TEST_DATABASES)('bulk, source tokens and S1 intake on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t, { modules: ['crm'] });
  });
  afterAll(async () => t?.close());

  describe('S2 bulk', () => {
    const bulk = (records: unknown[]) =>
      t.request({ method: 'POST', url: '/api/v1/records/bulk', key: account.apiKey, body: { records } });

    it('takes each entry on its own: failed entries never block the others', async () => {
      const response = await bulk([
        { entity: 'lead', fields: { email: 'b1@b.co' } },
        { entity: 'nope', fields: { email: 'b2@b.co' } },
        { entity: 'lead', fields: { interest: 'Wind' } },
        { entity: 'lead', fields: { email: 'b4@b.co', shoe: 1 } },
      ]);
      expect(response.statusCode).toBe(200);
      const body = response.json();
      expect(body.accepted).toBe(2);
      expect(body.rejected).toBe(2);
      expect(body.results[0]).toMatchObject({ entity: 'lead', created: true });
      expect(body.results[1]).toEqual({ error: 'unknown_entity' });
      expect(body.results[2].error).toBe('validation_failed');
      expect(body.results[3].warnings).toEqual([{ key: 'shoe', reason: 'unmapped' }]);
    });

    it('refuses an entry that is not an object, or names its entity wrongly, on its own', async () => {
      const response = await bulk([
        null,
        'text',
        [{ entity: 'lead' }],
        { entity: 5, fields: { email: 'e5@b.co' } },
        { fields: { email: 'e6@b.co' } },
        { entity: 'lead', fields: { email: 'ok@b.co' } },
      ]);
      expect(response.statusCode).toBe(200);
      const body = response.json();
      expect(body).toMatchObject({ accepted: 1, rejected: 5 });
      const notAnObject = {
        error: 'validation_failed',
        details: [{ key: 'body', reason: 'invalid_type', message: 'must be object' }],
      };
      expect(body.results.slice(0, 3)).toEqual([notAnObject, notAnObject, notAnObject]);
      expect(body.results[3].details).toEqual([
        expect.objectContaining({ key: 'entity', reason: 'invalid_type' }),
      ]);
      expect(body.results[4].details).toEqual([
        expect.objectContaining({ key: 'entity', reason: 'required' }),
      ]);
      expect(body.results[5]).toMatchObject({ entity: 'lead', created: true });
    });

    it('logs each bulk call, S2 and S1, as one entry listing every entry; single calls stay one entry each', async () => {
      const own = await accountWithLeads(t, { modules: ['crm'] });
      const log = async () =>
        (await t.request({ method: 'GET', url: '/api/v1/intake-log', key: own.apiKey })).json().entries;
      const s2 = await t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key: own.apiKey,
        body: {
          records: [
            { entity: 'lead', fields: { email: 'one@log.co' } },
            { entity: 'lead', fields: { interest: 'Wind' } },
            { entity: 'lead', fields: { email: 'other@log.co', shoe: 1 } },
          ],
        },
      });
      const [first, refused, again] = s2.json().results;
      const [entry] = await log();
      expect(entry).toMatchObject({
        endpoint: 'records.bulk',
        outcome: 'bulk',
        status_code: 200,
        record_id: null,
        entity: 'lead',
        error: null,
        items: [
          { index: 0, status: 'created', record_id: first.id },
          { index: 1, status: 'refused', error: 'validation_failed', details: refused.details },
          {
            index: 2,
            status: 'created',
            record_id: again.id,
            warnings: [{ key: 'shoe', reason: 'unmapped' }],
          },
        ],
      });
      expect(await log()).toHaveLength(1);

      const s1 = await t.request({
        method: 'POST',
        url: '/api/leads/bulk',
        key: own.apiKey,
        body: { entity: 'lead', batch: [{ email: 'two@log.co' }, { email: 'three@log.co' }] },
      });
      expect(s1.statusCode).toBe(200);
      const [two, three] = s1.json().created;
      const single = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: own.apiKey,
        body: { entity: 'lead', fields: { email: 'four@log.co' } },
      });
      const entries = await log();
      expect(entries).toHaveLength(3);
      expect(entries[0]).toMatchObject({
        outcome: 'created',
        record_id: single.json().id,
        items: null,
      });
      expect(entries[1]).toMatchObject({
        outcome: 'bulk',
        entity: 'lead',
        items: [
          { index: 0, status: 'created', record_id: two.lead_id },
          { index: 1, status: 'created', record_id: three.lead_id },
        ],
      });
      const rows = await t.db
        .selectFrom('intake_log')
        .select('id')
        .where('account_id', '=', own.id)
        .execute();
      expect(rows).toHaveLength(3);
    });

    it('takes at most 100 records', async () => {
      const records = Array.from({ length: 101 }, (_, i) => ({
        entity: 'lead',
        fields: { email: `m${i}@b.co` },
      }));
      const response = await t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key: account.apiKey,
        body: { records },
      });
      expect(response.statusCode).toBe(422);
      const hundred = await t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key: account.apiKey,
        body: { records: records.slice(0, 100) },
      });
      expect(hundred.json().accepted).toBe(100);
    });
  });

  describe('source tokens', () => {
    it('take in JSON and HTML forms under the source name, and nothing else', async () => {
      const source = (
        await t.request({
          method: 'POST',
          url: '/api/v1/settings/sources',
          key: account.apiKey,
          body: { name: 'Web form' },
        })
      ).json();
      const json = await t.request({
        method: 'POST',
        url: `/api/v1/in/${source.token}`,
        body: { entity: 'lead', fields: { email: 'form@b.co' } },
      });
      expect(json.statusCode).toBe(201);
      const form = await t.request({
        method: 'POST',
        url: `/api/v1/in/${source.token}`,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'entity=lead&email=html%40b.co&First+name=Html',
      });
      expect(form.statusCode).toBe(201);
      const record = await t.request({
        method: 'GET',
        url: `/api/v1/records/${form.json().id}`,
        key: account.apiKey,
      });
      expect(record.json()).toMatchObject({
        source: 'Web form',
        fields: { email: 'html@b.co', first_name: 'Html' },
      });

      // A source token only creates records.
      for (const [method, url] of [
        ['GET', '/api/v1/entities'],
        ['GET', `/api/v1/records/${form.json().id}`],
        ['POST', '/api/v1/records'],
        ['POST', '/api/v1/notes'],
      ] as const) {
        const response = await t.request({
          method,
          url,
          key: source.token,
          body: { entity: 'lead', body: 'x', record: form.json().id },
        });
        expect(response.statusCode, url).toBe(401);
      }
      expect(
        (await t.request({ method: 'POST', url: '/api/v1/in/st_unknown', body: { entity: 'lead' } }))
          .statusCode,
      ).toBe(401);
    });

    it('stop working when rotated away or revoked', async () => {
      const source = (
        await t.request({
          method: 'POST',
          url: '/api/v1/settings/sources',
          key: account.apiKey,
          body: { name: 'Rotating' },
        })
      ).json();
      const rotated = (
        await t.request({
          method: 'POST',
          url: `/api/v1/settings/sources/${source.id}/token`,
          key: account.apiKey,
        })
      ).json();
      const body = { entity: 'lead', fields: { email: 'rot@b.co' } };
      expect((await t.request({ method: 'POST', url: `/api/v1/in/${source.token}`, body })).statusCode).toBe(
        401,
      );
      expect((await t.request({ method: 'POST', url: `/api/v1/in/${rotated.token}`, body })).statusCode).toBe(
        201,
      );
      await t.request({
        method: 'DELETE',
        url: `/api/v1/settings/sources/${source.id}/token`,
        key: account.apiKey,
      });
      expect((await t.request({ method: 'POST', url: `/api/v1/in/${rotated.token}`, body })).statusCode).toBe(
        401,
      );
    });
  });

  describe('S1 intake', () => {
    it('matches normalised keys and labels from a form, by entity slug or uuid', async () => {
      const entityId = (
        await t.request({ method: 'GET', url: '/api/entities', key: account.apiKey })
      ).json()[0].id;
      const form = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: `lead_object=${entityId}&E-Mail+Address=s1%40b.co&first-name=Sam&LAST_NAME=One&Interest=solar&note=From+the+fair`,
      });
      expect(form.statusCode).toBe(200);
      expect(form.json()).toEqual({
        status: 'success',
        lead_id: expect.any(String),
        created_at: expect.any(String),
      });
      const lead = (
        await t.request({ method: 'GET', url: `/api/leads/${form.json().lead_id}`, key: account.apiKey })
      ).json();
      expect(lead.fields).toEqual({
        email: 's1@b.co',
        first_name: 'Sam',
        last_name: 'One',
        interest: 'Solar',
      });
      expect(lead.entity).toBe(entityId);
      expect(lead.events.map((e: { type: string }) => e.type)).toEqual(
        expect.arrayContaining(['lead_created', 'note_added']),
      );
    });

    it('takes notes with tags and viewers from a form in bracket spellings', async () => {
      const own = await accountWithLeads(t);
      for (const email of ['ann@br.co', 'ben@br.co']) {
        await t.request({
          method: 'POST',
          url: '/api/v1/settings/users',
          key: own.apiKey,
          body: { email, name: email },
        });
      }
      const post = (payload: string) =>
        t.request({
          method: 'POST',
          url: '/api/intake',
          key: own.apiKey,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: `entity=lead&email=br%40b.co&${payload}`,
        });
      const form = await post(
        [
          'notes[1][text]=second',
          'notes[1][tag]=fair',
          'notes[0][text]=first',
          'notes[]=plain',
          'viewers[]=ann%40br.co',
          'viewers[]=ben%40br.co',
        ].join('&'),
      );
      expect(form.statusCode).toBe(200);
      const id = form.json().lead_id;
      const notes = await t.db
        .selectFrom('notes')
        .select(['body', 'tag'])
        .where('record_id', '=', id)
        .orderBy('created_at')
        .execute();
      expect(notes.map((note) => [note.body, note.tag]).sort()).toEqual([
        ['first', null],
        ['plain', null],
        ['second', 'fair'],
      ]);
      const record = await t.db
        .selectFrom('records')
        .select('viewer_ids')
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      expect(record.viewer_ids).toHaveLength(2);
      // They are checked like their JSON spellings: an unknown viewer, an overlong tag.
      expect((await post('viewers[]=ghost%40br.co')).json().errors).toEqual({
        viewers: [expect.any(String)],
      });
      expect((await post(`notes[0][text]=x&notes[0][tag]=${'t'.repeat(101)}`)).json().errors).toEqual({
        'notes[0][tag]': [expect.any(String)],
      });
    });

    it('resolves assignee and viewers by uuid or email, notes with tags and the status of a pipeline', async () => {
      const user = (
        await t.request({
          method: 'POST',
          url: '/api/v1/settings/users',
          key: account.apiKey,
          body: { email: 'Rep@acme.test', name: 'Rep' },
        })
      ).json();
      const response = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        body: {
          entity: 'lead',
          email: 'assign@b.co',
          assignee: 'rep@ACME.test',
          viewers: [user.id],
          notes: ['plain', { text: 'tagged', tag: 'fair' }],
          'status:Sales': 'Won',
        },
      });
      expect(response.statusCode).toBe(200);
      const record = await t.db
        .selectFrom('records')
        .selectAll()
        .where('id', '=', response.json().lead_id)
        .executeTakeFirstOrThrow();
      expect(record.assignee_id).toBe(user.id);
      expect(record.viewer_ids).toEqual([user.id]);
      const lead = (
        await t.request({ method: 'GET', url: `/api/leads/${record.id}`, key: account.apiKey })
      ).json();
      expect(lead.status_step).toBe('Won');
      const notes = await t.db
        .selectFrom('notes')
        .select(['body', 'tag'])
        .where('record_id', '=', record.id)
        .orderBy('body')
        .execute();
      expect(notes).toEqual([
        { body: 'plain', tag: null },
        { body: 'tagged', tag: 'fair' },
      ]);
      const unknownUser = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        body: { entity: 'lead', email: 'x@b.co', assignee: 'nobody@acme.test' },
      });
      expect(unknownUser.statusCode).toBe(422);
      expect(unknownUser.json()).toMatchObject({
        status: 'error',
        errors: { assignee: [expect.any(String)] },
      });
    });

    it('a handover that updates a lead by the duplicate rule sets its assignee and adds its viewers', async () => {
      const own = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
      const user = async (email: string) =>
        (
          await t.request({
            method: 'POST',
            url: '/api/v1/settings/users',
            key: own.apiKey,
            body: { email, name: email },
          })
        ).json().id as string;
      const [rep, boss, peer] = [await user('rep@up.co'), await user('boss@up.co'), await user('peer@up.co')];
      const intake = async (body: Record<string, unknown>) => {
        const response = await t.request({ method: 'POST', url: '/api/intake', key: own.apiKey, body });
        expect(response.statusCode).toBe(200);
        return response.json().lead_id as string;
      };
      const stored = (id: string) =>
        t.db
          .selectFrom('records')
          .select(['assignee_id', 'viewer_ids'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
      const id = await intake({ entity: 'lead', email: 'same@up.co', viewers: [peer] });
      expect(
        await intake({ entity: 'lead', email: 'SAME@up.co', assignee: 'rep@up.co', viewers: boss }),
      ).toBe(id);
      expect(await stored(id)).toEqual({ assignee_id: rep, viewer_ids: [peer, boss] });
      // Without an assignee or viewers, a repeat leaves them; viewers already there are not doubled.
      expect(await intake({ entity: 'lead', email: 'same@up.co', viewers: [peer], first_name: 'Sam' })).toBe(
        id,
      );
      expect(await stored(id)).toEqual({ assignee_id: rep, viewer_ids: [peer, boss] });
      const bulk = await t.request({
        method: 'POST',
        url: '/api/leads/bulk',
        key: own.apiKey,
        body: { entity: 'lead', batch: [{ email: 'same@up.co', assignee: boss, viewers: 'rep@up.co' }] },
      });
      expect(bulk.json().created).toEqual([{ lead_id: id, email: 'same@up.co' }]);
      expect(await stored(id)).toEqual({ assignee_id: boss, viewer_ids: [peer, boss, rep] });
    });

    it('answers in the S1 body: 422 with errors, 404 for an unknown entity, 403 for a status without the CRM module', async () => {
      const invalid = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        body: { entity: 'lead', budget: 'x' },
      });
      expect(invalid.statusCode).toBe(422);
      expect(invalid.json()).toMatchObject({
        status: 'error',
        message: expect.any(String),
        errors: { budget: [expect.any(String)] },
      });
      const missing = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        body: { entity: 'lead', first_name: 'No mail' },
      });
      expect(missing.json()).toMatchObject({ status: 'error', errors: { email: [expect.any(String)] } });
      const unknown = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        body: { entity: 'house' },
      });
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json().status).toBe('error');
      const plain = await accountWithLeads(t);
      const noCrm = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: plain.apiKey,
        body: { entity: 'lead', email: 'n@b.co', 'status:Sales': 'Won' },
      });
      expect(noCrm.statusCode).toBe(403);
      expect(noCrm.json().status).toBe('error');
    });

    it('warns of a key a note object does not take (a misspelt tag), single and bulk; the note is added', async () => {
      const misspelt = { text: 'tagged', tga: 'fair' };
      const single = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        body: { entity: 'lead', email: 'tga@b.co', notes: [misspelt] },
      });
      expect(single.statusCode).toBe(200);
      expect(single.json().warnings).toEqual([{ key: 'notes.0.tga', reason: 'unmapped' }]);
      const bulk = await t.request({
        method: 'POST',
        url: '/api/leads/bulk',
        key: account.apiKey,
        body: { entity: 'lead', batch: [{ email: 'tga-bulk@b.co', notes: [misspelt] }] },
      });
      expect(bulk.statusCode).toBe(200);
      expect(bulk.json().created[0].warnings).toEqual([{ key: 'notes.0.tga', reason: 'unmapped' }]);
      const notes = await t.db
        .selectFrom('notes')
        .select(['body', 'tag'])
        .where('record_id', 'in', [single.json().lead_id, bulk.json().created[0].lead_id])
        .execute();
      expect(notes).toEqual([
        { body: 'tagged', tag: null },
        { body: 'tagged', tag: null },
      ]);
    });

    it('adds no blank note and says so in a warning: single, form, bulk, the call note and PATCH', async () => {
      const blank = { key: 'note', reason: 'blank', message: 'the note holds no text: no note was added' };
      const notesOf = async (id: string) =>
        (await t.db.selectFrom('notes').select('body').where('record_id', '=', id).execute()).map(
          (n) => n.body,
        );
      const single = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        body: {
          entity: 'lead',
          email: 'blank-s1@b.co',
          note: ' ',
          notes: ['kept', '\u200b', { text: '', tag: 'x' }],
        },
      });
      expect(single.statusCode).toBe(200);
      expect(single.json().warnings).toEqual([
        blank,
        { ...blank, key: 'notes.1' },
        { ...blank, key: 'notes.2' },
      ]);
      expect(await notesOf(single.json().lead_id)).toEqual(['kept']);
      const form = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'entity=lead&email=blank-form%40b.co&note=',
      });
      expect(form.json().warnings).toEqual([blank]);
      expect(await notesOf(form.json().lead_id)).toEqual([]);
      const bulk = await t.request({
        method: 'POST',
        url: '/api/leads/bulk',
        key: account.apiKey,
        body: {
          entity: 'lead',
          note: '  ',
          batch: [{ email: 'blank-bulk1@b.co' }, { email: 'blank-bulk2@b.co', note: 'own' }],
        },
      });
      expect(bulk.statusCode).toBe(200);
      expect(bulk.json().created.map((item: { warnings?: unknown }) => item.warnings)).toEqual([
        [blank],
        [blank],
      ]);
      expect(await notesOf(bulk.json().created[1].lead_id)).toEqual(['own']);
      const plain = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        body: { entity: 'lead', email: 'plain-s1@b.co', note: 'fine' },
      });
      expect(plain.json()).not.toHaveProperty('warnings');
      const patched = await t.request({
        method: 'PATCH',
        url: `/api/leads/${plain.json().lead_id}`,
        key: account.apiKey,
        body: { fields: { phone: '+4930123', shoe: '42' }, note: '\n' },
      });
      expect(patched.statusCode).toBe(200);
      expect(patched.json().warnings).toEqual([
        expect.objectContaining({ key: 'shoe', reason: 'unmapped' }),
        blank,
      ]);
      expect(await notesOf(plain.json().lead_id)).toEqual(['fine']);
      const quiet = await t.request({
        method: 'PATCH',
        url: `/api/leads/${plain.json().lead_id}`,
        key: account.apiKey,
        body: { fields: { phone: '+4930124' }, note: 'a real note' },
      });
      expect(quiet.json()).toEqual({
        status: 'success',
        lead_id: plain.json().lead_id,
        updated_fields: ['phone'],
      });
    });

    it('S1 bulk creates all or nothing, at most 1,000', async () => {
      const ok = await t.request({
        method: 'POST',
        url: '/api/leads/bulk',
        key: account.apiKey,
        body: {
          entity: 'lead',
          source: 'Import',
          batch: [{ email: 'Bulk1@b.co' }, { 'E-Mail Address': 'bulk2@b.co' }],
        },
      });
      expect(ok.statusCode).toBe(200);
      expect(ok.json().created.map((c: { email: string }) => c.email)).toEqual(['Bulk1@b.co', 'bulk2@b.co']);
      const record = await t.db
        .selectFrom('records')
        .select('source')
        .where('id', '=', ok.json().created[0].lead_id)
        .executeTakeFirstOrThrow();
      expect(record.source).toBe('Import');
      const bad = await t.request({
        method: 'POST',
        url: '/api/leads/bulk',
        key: account.apiKey,
        body: { entity: 'lead', batch: [{ email: 'fine@b.co' }, { email: 'broken' }] },
      });
      expect(bad.statusCode).toBe(422);
      expect(Object.keys(bad.json().errors)).toEqual(['batch.1.email']);
      expect(
        await t.db.selectFrom('records').select('id').where('email_lc', '=', 'fine@b.co').execute(),
      ).toHaveLength(0);
      const tooMany = await t.request({
        method: 'POST',
        url: '/api/leads/bulk',
        key: account.apiKey,
        body: { entity: 'lead', batch: Array.from({ length: 1001 }, (_, i) => ({ email: `t${i}@b.co` })) },
      });
      expect(tooMany.statusCode).toBe(422);
    });
  });
});

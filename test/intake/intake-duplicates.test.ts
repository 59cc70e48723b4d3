import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, putEntity } from '../helpers/fixtures.ts';

describe.each(TEST_DATABASES)('idempotency, external ids and duplicate rules on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind);
  });
  afterAll(async () => t?.close());

  const intake = (account: TestAccount, body: unknown, headers?: Record<string, string>) =>
    t.request({ method: 'POST', url: '/api/v1/records', key: account.apiKey, body, headers });
  const readRecord = (account: TestAccount, id: string) =>
    t.request({ method: 'GET', url: `/api/v1/records/${id}`, key: account.apiKey });
  const countByEmail = async (account: TestAccount, email: string) =>
    (
      await t.db
        .selectFrom('records')
        .select('id')
        .where('account_id', '=', account.id)
        .where('email_lc', '=', email.toLowerCase())
        .execute()
    ).length;

  describe('idempotency keys', () => {
    it('repeats the first answer with Idempotent-Replayed and creates no second record', async () => {
      const account = await accountWithLeads(t);
      const body = { entity: 'lead', fields: { email: 'idem@b.co' }, meta: { idempotency_key: 'order-1' } };
      const first = await intake(account, body);
      expect(first.statusCode).toBe(201);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      const again = await intake(account, body);
      expect(again.statusCode).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toBe(first.body);
      // The header works the same, in its own key space per account.
      const viaHeader = await intake(
        account,
        { entity: 'lead', fields: { email: 'hdr@b.co' } },
        { 'idempotency-key': 'h-1' },
      );
      const viaHeaderAgain = await intake(
        account,
        { entity: 'lead', fields: { email: 'hdr@b.co' } },
        { 'idempotency-key': 'h-1' },
      );
      expect(viaHeaderAgain.json().id).toBe(viaHeader.json().id);
      expect(await countByEmail(account, 'idem@b.co')).toBe(1);
      const other = await accountWithLeads(t);
      expect((await intake(other, body)).headers['idempotent-replayed']).toBeUndefined();
    });

    it('refuses the same key with another body (422) and malformed keys (400)', async () => {
      const account = await accountWithLeads(t);
      await intake(account, { entity: 'lead', fields: { email: 'a@b.co' }, meta: { idempotency_key: 'k' } });
      const reused = await intake(account, {
        entity: 'lead',
        fields: { email: 'other@b.co' },
        meta: { idempotency_key: 'k' },
      });
      expect(reused.statusCode).toBe(422);
      expect(reused.json()).toEqual({ error: 'idempotency_key_reused' });
      for (const key of ['x'.repeat(256), 'tab\there', 'bell\u0007']) {
        const bad = await intake(account, {
          entity: 'lead',
          fields: { email: 'c@b.co' },
          meta: { idempotency_key: key },
        });
        expect(bad.statusCode, key).toBe(400);
      }
    });

    it('takes one request sent with its key in meta and again in the header as the same request', async () => {
      const account = await accountWithLeads(t);
      const fields = { email: 'moved@b.co' };
      const inMeta = await intake(account, { entity: 'lead', fields, meta: { idempotency_key: 'moved-1' } });
      expect(inMeta.statusCode).toBe(201);
      const inHeader = await intake(account, { entity: 'lead', fields }, { 'idempotency-key': 'moved-1' });
      expect(inHeader.statusCode).toBe(201);
      expect(inHeader.headers['idempotent-replayed']).toBe('true');
      expect(inHeader.json().id).toBe(inMeta.json().id);
      // The other way round, with other meta beside the key.
      const meta = { source: 'shop' };
      const first = await intake(account, { entity: 'lead', fields, meta }, { 'idempotency-key': 'moved-2' });
      const again = await intake(account, {
        entity: 'lead',
        fields,
        meta: { ...meta, idempotency_key: 'moved-2' },
      });
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.json().id).toBe(first.json().id);
      // The rest of the body still counts.
      const changed = await intake(account, { entity: 'lead', fields, meta: { idempotency_key: 'moved-2' } });
      expect(changed.json()).toEqual({ error: 'idempotency_key_reused' });
      expect(await countByEmail(account, 'moved@b.co')).toBe(2);
    });

    it('stores a refusal and replays it', async () => {
      const account = await accountWithLeads(t);
      const body = { entity: 'lead', fields: { interest: 'Wind' }, meta: { idempotency_key: 'bad-1' } };
      const first = await intake(account, body);
      expect(first.statusCode).toBe(422);
      const again = await intake(account, body);
      expect(again.statusCode).toBe(422);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toBe(first.body);
    });

    it('gives twenty concurrent repeats one record and twenty identical answers', async () => {
      const account = await accountWithLeads(t);
      const body = { entity: 'lead', fields: { email: 'burst@b.co' }, meta: { idempotency_key: 'burst' } };
      const answers = await Promise.all(Array.from({ length: 20 }, () => intake(account, body)));
      expect(new Set(answers.map((a) => a.statusCode))).toEqual(new Set([201]));
      expect(new Set(answers.map((a) => a.body)).size).toBe(1);
      expect(await countByEmail(account, 'burst@b.co')).toBe(1);
    });
  });

  describe('external ids', () => {
    it('update the record they name and override the duplicate rule', async () => {
      const account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'create' } });
      const first = await intake(account, {
        entity: 'lead',
        fields: { email: 'ext@b.co', first_name: 'A' },
        meta: { external_id: 'crm-7' },
      });
      expect(first.statusCode).toBe(201);
      const same = await intake(account, {
        entity: 'lead',
        fields: { email: 'ext@b.co', first_name: 'B' },
        meta: { external_id: 'crm-7' },
      });
      expect(same.statusCode).toBe(200);
      expect(same.json()).toMatchObject({ id: first.json().id, created: false, updated: true });
      const read = await readRecord(account, first.json().id);
      expect(read.json()).toMatchObject({ external_id: 'crm-7', fields: { first_name: 'B' } });
      // A new external id makes a new record, even where the duplicate rule would match.
      const update = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
      const a = await intake(update, {
        entity: 'lead',
        fields: { email: 'twin@b.co' },
        meta: { external_id: 'x-1' },
      });
      const b = await intake(update, {
        entity: 'lead',
        fields: { email: 'twin@b.co' },
        meta: { external_id: 'x-2' },
      });
      expect(b.statusCode).toBe(201);
      expect(b.json().id).not.toBe(a.json().id);
    });

    /** Record A (owner-a) and record B (owner-b, external id crm-b) under the given rule. */
    const twoOwners = async (action: string) => {
      const account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action } });
      const a = await intake(account, { entity: 'lead', fields: { email: 'owner-a@x.co' } });
      const b = await intake(account, {
        entity: 'lead',
        fields: { email: 'owner-b@x.co', first_name: 'Bea' },
        meta: { external_id: 'crm-b' },
      });
      expect([a.statusCode, b.statusCode]).toEqual([201, 201]);
      return { account, a: a.json().id as string, b: b.json().id as string };
    };
    const logOf = async (account: TestAccount, requestId: string) =>
      (
        await t.request({
          method: 'GET',
          url: `/api/v1/intake-log?request_id=${requestId}`,
          key: account.apiKey,
        })
      ).json().entries;

    it.each(['update', 'ignore'])(
      '%s rule: an update that would give the record another record’s duplicate values is 409 conflict duplicate, and writes nothing',
      async (action) => {
        const { account, a, b } = await twoOwners(action);
        const clash = await intake(
          account,
          {
            entity: 'lead',
            fields: { email: ' OWNER-A@x.co ', first_name: 'Changed' },
            note: 'not kept',
            meta: { external_id: 'crm-b' },
          },
          { 'x-request-id': `clash-${action}` },
        );
        expect(clash.statusCode, clash.body).toBe(409);
        // As a PATCH answers it (decisions: Records).
        expect(clash.json()).toEqual({ error: 'conflict', reason: 'duplicate' });
        const stored = (await readRecord(account, b)).json();
        expect(stored.fields).toEqual({ email: 'owner-b@x.co', first_name: 'Bea' });
        const history = await t.request({
          method: 'GET',
          url: `/api/v1/records/${b}/history`,
          key: account.apiKey,
        });
        expect(history.json().events.map((event: { type: string }) => event.type)).toEqual(['lead_created']);
        expect((await readRecord(account, a)).json().fields).toEqual({ email: 'owner-a@x.co' });
        expect(await countByEmail(account, 'owner-a@x.co')).toBe(1);
        expect(await logOf(account, `clash-${action}`)).toEqual([
          expect.objectContaining({
            outcome: 'refused',
            status_code: 409,
            error: 'conflict',
            record_id: null,
          }),
        ]);
        // Values no other record holds still update it, its own address in another case too.
        const renamed = await intake(account, {
          entity: 'lead',
          fields: { email: 'OWNER-B@x.co', first_name: 'Bee' },
          meta: { external_id: 'crm-b' },
        });
        expect(renamed.statusCode, renamed.body).toBe(200);
        expect(renamed.json()).toMatchObject({ id: b, created: false, updated: true });
        const moved = await intake(account, {
          entity: 'lead',
          fields: { email: 'owner-c@x.co' },
          meta: { external_id: 'crm-b' },
        });
        expect(moved.json()).toMatchObject({ id: b, updated: true });
        // A record made for a new external id beside a stored twin shares its values outside the
        // rule (decisions: Intake), and stays updatable by its external id.
        const twin = await intake(account, {
          entity: 'lead',
          fields: { email: 'owner-a@x.co' },
          meta: { external_id: 'crm-twin' },
        });
        expect(twin.statusCode).toBe(201);
        const twinUpdate = await intake(account, {
          entity: 'lead',
          fields: { email: 'owner-a@x.co', first_name: 'Twin' },
          meta: { external_id: 'crm-twin' },
        });
        expect(twinUpdate.statusCode, twinUpdate.body).toBe(200);
        expect(twinUpdate.json()).toMatchObject({ id: twin.json().id, updated: true });
      },
    );

    it('stores the 409 under an idempotency key and replays it', async () => {
      const { account, b } = await twoOwners('update');
      const body = {
        entity: 'lead',
        fields: { email: 'owner-a@x.co' },
        meta: { external_id: 'crm-b', idempotency_key: 'clash-1' },
      };
      const first = await intake(account, body);
      expect(first.statusCode, first.body).toBe(409);
      expect(first.json()).toMatchObject({ error: 'conflict', reason: 'duplicate' });
      const again = await intake(account, body, { 'x-request-id': 'clash-replay' });
      expect(again.statusCode).toBe(409);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toBe(first.body);
      expect(await logOf(account, 'clash-replay')).toEqual([
        expect.objectContaining({ outcome: 'replayed', status_code: 409, error: 'conflict' }),
      ]);
      expect((await readRecord(account, b)).json().fields.email).toBe('owner-b@x.co');
    });

    it('in a bulk call refuses that entry alone; the entries before and after are written', async () => {
      const { account, a, b } = await twoOwners('update');
      const response = await t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key: account.apiKey,
        headers: { 'x-request-id': 'clash-bulk' },
        body: {
          records: [
            { entity: 'lead', fields: { email: 'before@x.co' } },
            { entity: 'lead', fields: { email: 'Owner-A@x.co' }, meta: { external_id: 'crm-b' } },
            { entity: 'lead', fields: { email: 'owner-a@x.co', first_name: 'Ann' } },
            { entity: 'lead', fields: { email: 'after@x.co' }, meta: { idempotency_key: 'after-1' } },
          ],
        },
      });
      expect(response.statusCode, response.body).toBe(200);
      const { accepted, rejected, results } = response.json();
      expect({ accepted, rejected }).toEqual({ accepted: 3, rejected: 1 });
      expect(results[0]).toMatchObject({ created: true });
      expect(results[1]).toMatchObject({ error: 'conflict', reason: 'duplicate' });
      expect(results[2]).toMatchObject({ id: a, created: false, updated: true });
      expect(results[3]).toMatchObject({ created: true });
      expect((await readRecord(account, b)).json().fields.email).toBe('owner-b@x.co');
      expect((await readRecord(account, a)).json().fields).toEqual({
        email: 'owner-a@x.co',
        first_name: 'Ann',
      });
      expect(await countByEmail(account, 'before@x.co')).toBe(1);
      expect(await countByEmail(account, 'after@x.co')).toBe(1);
      const [entry, ...more] = await logOf(account, 'clash-bulk');
      expect(more).toEqual([]);
      expect(entry).toMatchObject({ outcome: 'bulk', status_code: 200 });
      expect(entry.items.map((item: { status: string }) => item.status)).toEqual([
        'created',
        'refused',
        'updated',
        'created',
      ]);
      expect(entry.items[1]).toMatchObject({ index: 1, error: 'conflict' });
    });

    it('from a source token stays 409 external_id: the token never updates', async () => {
      const { account, b } = await twoOwners('update');
      const token = (
        await t.request({
          method: 'POST',
          url: '/api/v1/settings/sources',
          key: account.apiKey,
          body: { name: 'Website' },
        })
      ).json().token as string;
      const posted = await t.request({
        method: 'POST',
        url: `/api/v1/in/${token}`,
        body: { entity: 'lead', fields: { email: 'owner-a@x.co' }, meta: { external_id: 'crm-b' } },
      });
      expect(posted.statusCode).toBe(409);
      expect(posted.json()).toMatchObject({ error: 'conflict', reason: 'external_id' });
      expect((await readRecord(account, b)).json().fields.email).toBe('owner-b@x.co');
    });
  });

  describe('duplicate rules', () => {
    it('update: merges non-empty incoming values into the existing record, comparing email without case', async () => {
      const account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
      const first = await intake(account, {
        entity: 'lead',
        fields: { email: 'Dup@b.co', first_name: 'Ann', phone: '+49 30 123456' },
      });
      const second = await intake(account, {
        entity: 'lead',
        fields: { email: ' dup@B.CO ', first_name: 'Anna', phone: '' },
      });
      expect(second.statusCode).toBe(200);
      expect(second.json()).toMatchObject({
        id: first.json().id,
        created: false,
        updated: true,
        warnings: [],
      });
      const read = await readRecord(account, first.json().id);
      expect(read.json().fields).toMatchObject({ first_name: 'Anna', phone: '+49 30 123456' });
    });

    it('update: a repeat that changes nothing leaves no history entry; one that does names its fields and its sender', async () => {
      const account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
      const body = { entity: 'lead', fields: { email: 'same@b.co', first_name: 'Ann' } };
      const id = (await intake(account, body)).json().id;
      const updates = async () =>
        (await t.request({ method: 'GET', url: `/api/v1/records/${id}/history`, key: account.apiKey }))
          .json()
          .events.filter((event: { type: string }) => event.type === 'lead_updated');
      const same = await intake(account, body);
      expect(same.json()).toMatchObject({ id, created: false });
      expect(await updates()).toEqual([]);

      const sync = await t.request({
        method: 'POST',
        url: '/api/v1/settings/api-keys',
        key: account.apiKey,
        body: { name: 'Shop sync' },
      });
      const viaSync = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: sync.json().key,
        body: { entity: 'lead', fields: { email: 'same@b.co', first_name: 'Ann', last_name: 'Lee' } },
      });
      expect(viaSync.json()).toMatchObject({ id, created: false, updated: true });
      const [updated, ...more] = await updates();
      expect(more).toEqual([]);
      expect(updated).toMatchObject({
        data: { fields: ['last_name'] },
        actor: { type: 'api_key', name: 'Shop sync' },
      });
    });

    it('compares letters with accents the same whether sent composed or decomposed (NFC)', async () => {
      const account = await accountWithLeads(t, {
        duplicateRule: { match: ['last_name'], action: 'update' },
      });
      // "Müller" with ü as one character (U+00FC), then as u + combining diaeresis (U+0308).
      const composed = 'M\u00fcller';
      const decomposed = 'Mu\u0308ller';
      const first = await intake(account, {
        entity: 'lead',
        fields: { email: 'j\u00fcrgen@b.co', last_name: composed, interest: 'Solar' },
      });
      expect(first.statusCode, first.body).toBe(201);
      const second = await intake(account, {
        entity: 'lead',
        fields: { email: 'j\u00fcrgen@b.co', last_name: ` ${decomposed.toUpperCase()} `, company: 'Acme' },
      });
      expect(second.statusCode, second.body).toBe(200);
      expect(second.json()).toMatchObject({ id: first.json().id, created: false, updated: true });
      // Notes find the record by its email in either form; stored values keep the spelling sent.
      const note = await t.request({
        method: 'POST',
        url: '/api/v1/notes',
        key: account.apiKey,
        body: { email: 'JU\u0308RGEN@b.co', body: 'Called back' },
      });
      expect(note.statusCode, note.body).toBe(201);
      expect(note.json().record_id).toBe(first.json().id);
      const read = await readRecord(account, first.json().id);
      expect(read.json().fields).toMatchObject({ company: 'Acme', email: 'j\u00fcrgen@b.co' });
      expect(read.json().fields.last_name).toBe(` ${decomposed.toUpperCase()} `.trim());
      // A select option is found the same way, and stored in the option's own spelling.
      await putEntity(t, account, 'roof', {
        name: 'Roof',
        fields: [{ key: 'kind', label: 'Kind', type: 'select', options: ['\u00dcberdachung', 'Flachdach'] }],
      });
      const roof = await intake(account, { entity: 'roof', fields: { kind: 'u\u0308berdachung' } });
      expect(roof.statusCode, roof.body).toBe(201);
      const stored = await readRecord(account, roof.json().id);
      expect(stored.json().fields.kind).toBe('\u00dcberdachung');
      // Options changed: the new list is matched, the old one no longer.
      await putEntity(t, account, 'roof', {
        name: 'Roof',
        fields: [{ key: 'kind', label: 'Kind', type: 'select', options: ['Flachdach', 'Gr\u00fcndach'] }],
      });
      const green = await intake(account, { entity: 'roof', fields: { kind: ' GRU\u0308NDACH' } });
      expect(green.statusCode, green.body).toBe(201);
      const readGreen = await readRecord(account, green.json().id);
      expect(readGreen.json().fields.kind).toBe('Gr\u00fcndach');
      const gone = await intake(account, { entity: 'roof', fields: { kind: 'u\u0308berdachung' } });
      expect(gone.statusCode).toBe(422);
    });

    it('ignore: changes nothing and warns duplicate', async () => {
      const account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'ignore' } });
      const first = await intake(account, {
        entity: 'lead',
        fields: { email: 'ign@b.co', first_name: 'Old' },
      });
      const second = await intake(account, {
        entity: 'lead',
        fields: { email: 'ign@b.co', first_name: 'New' },
      });
      expect(second.statusCode).toBe(200);
      expect(second.json()).toMatchObject({ id: first.json().id, created: false, updated: false });
      expect(second.json().warnings).toContainEqual(
        expect.objectContaining({ key: 'record', reason: 'duplicate' }),
      );
      const read = await readRecord(account, first.json().id);
      expect(read.json().fields.first_name).toBe('Old');
    });

    it('create: makes a new record linked to the older one', async () => {
      const account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'create' } });
      const first = await intake(account, { entity: 'lead', fields: { email: 'cr@b.co' } });
      const second = await intake(account, { entity: 'lead', fields: { email: 'cr@b.co' } });
      expect(second.statusCode).toBe(201);
      const row = await t.db
        .selectFrom('records')
        .select('duplicate_of')
        .where('id', '=', second.json().id)
        .executeTakeFirstOrThrow();
      expect(row.duplicate_of).toBe(first.json().id);
    });

    it('serialises concurrent duplicates: ten at once make one record', async () => {
      const account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          intake(account, { entity: 'lead', fields: { email: 'race@b.co', rooms: i } }),
        ),
      );
      expect(answers.filter((a) => a.statusCode === 201)).toHaveLength(1);
      expect(await countByEmail(account, 'race@b.co')).toBe(1);
    });
  });

  describe('security: a source token only creates records', () => {
    const sourceToken = async (account: TestAccount) =>
      (
        await t.request({
          method: 'POST',
          url: '/api/v1/settings/sources',
          key: account.apiKey,
          body: { name: 'Website' },
        })
      ).json().token as string;
    const viaToken = (token: string, body: unknown) =>
      t.request({ method: 'POST', url: `/api/v1/in/${token}`, body });

    it('under an update rule, a stored email makes a new record linked to the stored one, which stays as it was', async () => {
      const account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
      const stored = await intake(account, {
        entity: 'lead',
        fields: { email: 'kept@b.co', first_name: 'Ann' },
      });
      const token = await sourceToken(account);
      const posted = await viaToken(token, {
        entity: 'lead',
        fields: { email: 'KEPT@b.co', first_name: 'Mallory', phone: '+49 30 999999' },
        note: 'from the form',
      });
      expect(posted.statusCode).toBe(201);
      expect(posted.json()).toMatchObject({ created: true, updated: false });
      expect(posted.json().id).not.toBe(stored.json().id);
      expect(posted.json().warnings).toEqual([
        expect.objectContaining({ key: 'record', reason: 'duplicate' }),
      ]);
      expect(posted.json().warnings[0].message).toContain(stored.json().id);
      const before = (await readRecord(account, stored.json().id)).json();
      expect(before.fields).toEqual({ email: 'kept@b.co', first_name: 'Ann' });
      const history = await t.request({
        method: 'GET',
        url: `/api/v1/records/${stored.json().id}/history`,
        key: account.apiKey,
      });
      expect(history.json().events.map((event: { type: string }) => event.type)).toEqual(['lead_created']);
      const linked = await t.db
        .selectFrom('records')
        .select(['duplicate_of'])
        .where('account_id', '=', account.id)
        .where('id', '=', posted.json().id)
        .executeTakeFirstOrThrow();
      expect(linked.duplicate_of).toBe(stored.json().id);
      // The API key's handovers still update the first record, not the linked one.
      const update = await intake(account, {
        entity: 'lead',
        fields: { email: 'kept@b.co', last_name: 'Lee' },
      });
      expect(update.json()).toMatchObject({ id: stored.json().id, created: false, updated: true });
      expect(await countByEmail(account, 'kept@b.co')).toBe(2);
    });

    it('a stored record’s external id is 409 conflict, and the record stays as it was', async () => {
      const account = await accountWithLeads(t);
      const stored = await intake(account, {
        entity: 'lead',
        fields: { email: 'ext@b.co', first_name: 'Ann' },
        meta: { external_id: 'crm-7' },
      });
      const token = await sourceToken(account);
      const posted = await viaToken(token, {
        entity: 'lead',
        fields: { email: 'evil@b.co', first_name: 'Mallory' },
        note: 'overwritten?',
        meta: { external_id: 'crm-7' },
      });
      expect(posted.statusCode).toBe(409);
      expect(posted.json()).toMatchObject({ error: 'conflict', reason: 'external_id' });
      expect(posted.body).not.toContain(stored.json().id);
      expect((await readRecord(account, stored.json().id)).json().fields).toEqual({
        email: 'ext@b.co',
        first_name: 'Ann',
      });
      expect(await countByEmail(account, 'evil@b.co')).toBe(0);
      // A new external id creates, as for any sender.
      const fresh = await viaToken(token, {
        entity: 'lead',
        fields: { email: 'new@b.co' },
        meta: { external_id: 'crm-8' },
      });
      expect(fresh.statusCode).toBe(201);
    });
  });

  describe('the intake log', () => {
    it('lists every call with its outcome, newest first, only to its account', async () => {
      const account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'ignore' } });
      const created = await intake(
        account,
        { entity: 'lead', fields: { email: 'log@b.co', shoe_size: 44 } },
        { 'x-request-id': 'log-1' },
      );
      await intake(account, { entity: 'lead', fields: { email: 'log@b.co' } }, { 'x-request-id': 'log-2' });
      await intake(account, { entity: 'lead', fields: {} }, { 'x-request-id': 'log-3' });
      const page = (
        await t.request({ method: 'GET', url: '/api/v1/intake-log?limit=2', key: account.apiKey })
      ).json();
      expect(
        page.entries.map((e: { request_id: string; outcome: string }) => `${e.request_id}:${e.outcome}`),
      ).toEqual(['log-3:refused', 'log-2:unchanged']);
      expect(page.entries[1].warnings).toContainEqual(expect.objectContaining({ reason: 'duplicate' }));
      const rest = (
        await t.request({
          method: 'GET',
          url: `/api/v1/intake-log?limit=2&cursor=${page.next_cursor}`,
          key: account.apiKey,
        })
      ).json();
      expect(rest.entries).toHaveLength(1);
      expect(rest.entries[0]).toMatchObject({
        request_id: 'log-1',
        outcome: 'created',
        record_id: created.json().id,
        source: 'api',
        entity: 'lead',
        endpoint: 'records',
        status_code: 201,
        warnings: [{ key: 'shoe_size', reason: 'unmapped' }],
      });
      expect(rest.next_cursor).toBeNull();
      const other = await accountWithLeads(t);
      expect(
        (await t.request({ method: 'GET', url: '/api/v1/intake-log', key: other.apiKey })).json().entries,
      ).toEqual([]);
    });
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { BROWSER_ACCEPT, createSource, FORM, multipart, readRecord, recordsOf } from './support.ts';

/**
 * The encodings of POST /api/v1/in/{token} (decisions §13): JSON, url-encoded and multipart;
 * `meta[key]` and `fields[key]` fill those objects; file parts are dropped with a warning.
 */
describe.each(TEST_DATABASES)('website forms: encodings on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  let url: string;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t);
    url = (await createSource(t, account)).url;
  });
  afterAll(async () => t?.close());

  const post = (
    payload: string | Buffer,
    contentType: string,
    target = url,
    headers: Record<string, string> = {},
  ) =>
    t.request({ method: 'POST', url: target, headers: { 'content-type': contentType, ...headers }, payload });

  describe('happy path', () => {
    it('reads fields[…] and meta[…] of a url-encoded form, UTF-8 text included', async () => {
      const form = new URLSearchParams([
        ['entity', 'lead'],
        ['fields[email]', 'jörg@b.co'],
        ['fields[first_name]', 'Jörg 🌞'],
        ['last_name', 'Bäcker'],
        ['fields[topics]', 'Price'],
        ['fields[topics]', 'Funding'],
        ['meta[utm_source]', 'newsletter'],
        ['meta[gclid]', 'g-1'],
        ['meta[campaign_x]', 'x'],
        ['note', 'Bitte zurückrufen'],
      ]);
      const answer = await post(form.toString(), FORM);
      expect(answer.statusCode).toBe(201);
      expect(answer.json().warnings).toEqual([{ key: 'meta.campaign_x', reason: 'unmapped' }]);
      const record = await readRecord(t, account, answer.json().id);
      expect(record.fields).toMatchObject({
        email: 'jörg@b.co',
        first_name: 'Jörg 🌞',
        last_name: 'Bäcker',
        topics: ['Price', 'Funding'],
      });
      expect(record.origin).toEqual({ utm_source: 'newsletter', gclid: 'g-1' });
    });

    it('reads a multipart form the same way, and drops its file parts with inline_file warnings', async () => {
      const body = multipart([
        { name: 'entity', value: 'lead' },
        { name: 'fields[email]', value: 'multi@b.co' },
        { name: 'fields[first_name]', value: 'Zoë ✨' },
        { name: 'meta[utm_campaign]', value: 'spring' },
        { name: 'straße', value: 'Hauptstraße 1' },
        { name: 'cv', value: Buffer.alloc(300_000, 7), filename: 'cv.pdf', contentType: 'application/pdf' },
        { name: 'fields[photo]', value: 'GIF89a', filename: 'me.gif' },
      ]);
      const answer = await post(body.payload, body.contentType);
      expect(answer.statusCode).toBe(201);
      expect(answer.json().warnings).toEqual([
        expect.objectContaining({ key: 'cv', reason: 'inline_file' }),
        expect.objectContaining({ key: 'fields[photo]', reason: 'inline_file' }),
        expect.objectContaining({ key: 'straße', reason: 'unmapped' }),
      ]);
      const record = await readRecord(t, account, answer.json().id);
      expect(record.fields).toMatchObject({ email: 'multi@b.co', first_name: 'Zoë ✨' });
      expect(record.fields).not.toHaveProperty('photo');
      expect(record.origin).toEqual({ utm_campaign: 'spring' });
      expect(record.documents).toEqual([]);
    });

    it('answers JSON clients exactly as POST /api/v1/records does', async () => {
      const answer = await t.request({
        method: 'POST',
        url,
        body: { entity: 'lead', fields: { email: 'json@b.co' }, meta: { utm_source: 'x' } },
      });
      expect(answer.statusCode).toBe(201);
      expect(answer.headers['content-type']).toMatch(/^application\/json/);
      expect(Object.keys(answer.json()).sort()).toEqual(['created', 'entity', 'id', 'updated', 'warnings']);
      expect(answer.json()).toMatchObject({ entity: 'lead', created: true, updated: false, warnings: [] });
    });

    it('takes meta[idempotency_key] of a form: the repeat answers the same, one record', async () => {
      const form = 'entity=lead&fields%5Bemail%5D=idem%40b.co&meta%5Bidempotency_key%5D=form-key-1';
      const first = await post(form, FORM);
      const again = await post(form, FORM);
      expect(first.statusCode).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.json()).toEqual(first.json());
      const badKey = await post(
        'entity=lead&fields%5Bemail%5D=k%40b.co&meta%5Bidempotency_key%5D=%01x',
        FORM,
      );
      expect(badKey.statusCode).toBe(400);
      expect(badKey.json().error).toBe('invalid_idempotency_key');
    });

    it('reads an empty meta[idempotency_key] of a form as no key, in both form encodings', async () => {
      const before = (await recordsOf(t, account)).length;
      // A hidden key input no script filled: each post is a record of its own, no replay.
      const form = 'entity=lead&fields%5Bemail%5D=nokey%40b.co&meta%5Bidempotency_key%5D=';
      const first = await post(form, FORM);
      const second = await post(form, FORM);
      expect([first.statusCode, second.statusCode]).toEqual([201, 201]);
      expect(second.headers['idempotent-replayed']).toBeUndefined();
      expect(second.json().id).not.toBe(first.json().id);
      expect(first.json().warnings).toEqual([]);
      const body = multipart([
        { name: 'entity', value: 'lead' },
        { name: 'fields[email]', value: 'nokey2@b.co' },
        { name: 'meta[idempotency_key]', value: '' },
      ]);
      const multi = await post(body.payload, body.contentType);
      expect(multi.statusCode).toBe(201);
      expect((await recordsOf(t, account)).length).toBe(before + 3);
      // The header still gives the key beside an empty field.
      const keyed = await t.request({
        method: 'POST',
        url,
        headers: { 'content-type': FORM, 'idempotency-key': 'beside-empty-field' },
        payload: form,
      });
      const keyedAgain = await t.request({
        method: 'POST',
        url,
        headers: { 'content-type': FORM, 'idempotency-key': 'beside-empty-field' },
        payload: form,
      });
      expect(keyedAgain.headers['idempotent-replayed']).toBe('true');
      expect(keyedAgain.json().id).toBe(keyed.json().id);
      // JSON has null for no key: its empty key and an empty header stay 400 (decisions §4).
      const emptyJson = await t.request({
        method: 'POST',
        url,
        body: { entity: 'lead', fields: { email: 'nokey3@b.co' }, meta: { idempotency_key: '' } },
      });
      expect(emptyJson.statusCode).toBe(400);
      expect(emptyJson.json().error).toBe('invalid_idempotency_key');
    });
  });

  describe('errors', () => {
    it('refuses a multipart body whose text is over 1 MiB (413), but streams a 25 MiB file through', async () => {
      const big = multipart([
        { name: 'entity', value: 'lead' },
        { name: 'fields[email]', value: 'big@b.co' },
        { name: 'fields[message]', value: 'x'.repeat(1024 * 1024) },
      ]);
      const tooBig = await post(big.payload, big.contentType);
      expect(tooBig.statusCode).toBe(413);
      expect(tooBig.json()).toMatchObject({ error: 'payload_too_large' });

      const before = (await recordsOf(t, account)).length;
      const fileAtLimit = multipart([
        { name: 'entity', value: 'lead' },
        { name: 'fields[email]', value: 'file@b.co' },
        { name: 'upload', value: Buffer.alloc(25 * 1024 * 1024, 1), filename: 'big.bin' },
      ]);
      const taken = await post(fileAtLimit.payload, fileAtLimit.contentType);
      expect(taken.statusCode).toBe(201);
      expect(taken.json().warnings).toEqual([
        expect.objectContaining({ key: 'upload', reason: 'inline_file' }),
      ]);
      expect((await recordsOf(t, account)).length).toBe(before + 1);

      const fileOver = multipart([
        { name: 'entity', value: 'lead' },
        { name: 'fields[email]', value: 'over@b.co' },
        { name: 'upload', value: Buffer.alloc(25 * 1024 * 1024 + 1, 1), filename: 'big.bin' },
      ]);
      const refused = await post(fileOver.payload, fileOver.contentType);
      expect(refused.statusCode).toBe(413);
      expect((await recordsOf(t, account)).length).toBe(before + 1);
    });

    it('refuses more than 20 file parts (413) and writes nothing', async () => {
      const before = (await recordsOf(t, account)).length;
      const parts = [
        { name: 'entity', value: 'lead' },
        { name: 'fields[email]', value: 'files@b.co' },
        ...Array.from({ length: 21 }, (_, index) => ({ name: `f${index}`, value: 'x', filename: 'x.txt' })),
      ];
      const body = multipart(parts);
      expect((await post(body.payload, body.contentType)).statusCode).toBe(413);
      expect((await recordsOf(t, account)).length).toBe(before);
    });

    it('refuses a malformed multipart body with 400 invalid_body', async () => {
      const noBoundary = await post('entity=lead', 'multipart/form-data');
      expect(noBoundary.statusCode).toBe(400);
      expect(noBoundary.json().error).toBe('invalid_body');
      const truncated = multipart([{ name: 'entity', value: 'lead' }]);
      const cut = await post(truncated.payload.subarray(0, 60), truncated.contentType);
      expect(cut.statusCode).toBe(400);
      expect(cut.json().error).toBe('invalid_body');
    });

    it('keeps the required-field rule in every encoding', async () => {
      const json = await t.request({
        method: 'POST',
        url,
        body: { entity: 'lead', fields: { first_name: 'x' } },
      });
      const form = await post('entity=lead&fields%5Bfirst_name%5D=x', FORM);
      const body = multipart([
        { name: 'entity', value: 'lead' },
        { name: 'fields[first_name]', value: 'x' },
      ]);
      const multi = await post(body.payload, body.contentType);
      for (const answer of [json, form, multi]) {
        expect(answer.statusCode).toBe(422);
        expect(answer.json().details).toEqual([
          expect.objectContaining({ key: 'email', reason: 'required' }),
        ]);
      }
    });

    it('refuses names, and keys in fields[…] and meta[…], over 100 characters as JSON does', async () => {
      const before = (await recordsOf(t, account)).length;
      const long = 'k'.repeat(101);
      const json = await t.request({
        method: 'POST',
        url,
        body: { entity: 'lead', email: 'n@b.co', [long]: 'v' },
      });
      expect(json.json().details).toEqual([
        { key: long, reason: 'out_of_range', message: 'the name must NOT have more than 100 characters' },
      ]);
      const cases: [string, string][] = [
        [long, 'the name must NOT have more than 100 characters'],
        [`fields[${long}]`, 'the key in fields[…] must NOT have more than 100 characters'],
        [`meta[${long}]`, 'the key in meta[…] must NOT have more than 100 characters'],
      ];
      for (const [name, message] of cases) {
        const form = new URLSearchParams([
          ['entity', 'lead'],
          ['email', 'n@b.co'],
          [name, 'v'],
        ]);
        const text = multipart([
          { name: 'entity', value: 'lead' },
          { name: 'email', value: 'n@b.co' },
          { name, value: 'v' },
        ]);
        const file = multipart([
          { name: 'entity', value: 'lead' },
          { name: 'email', value: 'n@b.co' },
          { name, value: 'x', filename: 'x.txt' },
        ]);
        for (const answer of [
          await post(form.toString(), FORM),
          await post(text.payload, text.contentType),
          await post(file.payload, file.contentType),
        ]) {
          expect({ name, status: answer.statusCode }).toEqual({ name, status: 422 });
          expect(answer.json().details).toEqual([{ key: name, reason: 'out_of_range', message }]);
        }
      }
      // 100 characters, counted as code points, are taken; a part name past busboy's 80 KiB
      // header limit (which cuts it) is refused all the same.
      const atLimit = await post(
        `entity=lead&email=n%40b.co&${encodeURIComponent(`fields[${'🌞'.repeat(100)}]`)}=v`,
        FORM,
      );
      expect(atLimit.statusCode).toBe(201);
      const huge = multipart([
        { name: 'entity', value: 'lead' },
        { name: 'email', value: 'n@b.co' },
        { name: 'k'.repeat(100_000), value: 'v' },
      ]);
      const hugeAnswer = await post(huge.payload, huge.contentType);
      expect(hugeAnswer.statusCode).toBe(422);
      expect(hugeAnswer.json().details[0].reason).toBe('out_of_range');
      expect((await recordsOf(t, account)).length).toBe(before + 1);
    });

    it('says what a bare fields or meta name should be, in JSON and on the page', async () => {
      for (const node of ['fields', 'meta']) {
        const answer = await post(`entity=lead&email=b%40b.co&${node}=x`, FORM);
        expect(answer.statusCode).toBe(422);
        expect(answer.json().details).toEqual([
          { key: node, reason: 'invalid_type', message: `${node} takes named values: ${node}[name]=…` },
        ]);
      }
      const crm = await post('entity=lead&email=b%40b.co&crm=x', FORM);
      expect(crm.json().details).toEqual([
        { key: 'crm', reason: 'not_allowed', message: 'crm is not taken from a form: send the body as JSON' },
      ]);
      const page = await post('entity=lead&email=b%40b.co&meta=x', FORM, url, { accept: BROWSER_ACCEPT });
      expect(page.statusCode).toBe(422);
      expect(page.body).toContain('<strong>meta</strong> has a value of the wrong kind');
    });

    it('answers 415 for multipart where the document does not list it', async () => {
      const created = await t.createAccount();
      const body = multipart([{ name: 'entity', value: 'lead' }]);
      for (const target of ['/api/v1/records', '/api/intake', '/api/v1/records/bulk']) {
        const answer = await t.request({
          method: 'POST',
          url: target,
          key: created.apiKey,
          headers: { 'content-type': body.contentType },
          payload: body.payload,
        });
        expect({ target, status: answer.statusCode }).toEqual({ target, status: 415 });
      }
    });
  });

  describe('security', () => {
    it('keeps __proto__ and constructor names as data in form encodings', async () => {
      const form =
        'entity=lead&fields%5Bemail%5D=proto%40b.co&fields%5B__proto__%5D=x&constructor=y&meta%5B__proto__%5D=z';
      const answer = await post(form, FORM);
      expect(answer.statusCode).toBe(201);
      expect(answer.json().warnings).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ key: '__proto__', reason: 'unmapped' }),
          expect.objectContaining({ key: 'constructor', reason: 'unmapped' }),
          expect.objectContaining({ key: 'meta.__proto__', reason: 'unmapped' }),
        ]),
      );
      const body = multipart([
        { name: 'entity', value: 'lead' },
        { name: 'fields[email]', value: 'proto2@b.co' },
        { name: '__proto__', value: 'a' },
        { name: 'toString', value: 'b' },
        { name: 'fields[constructor]', value: 'c' },
      ]);
      const multi = await post(body.payload, body.contentType);
      expect(multi.statusCode).toBe(201);
      expect(
        multi
          .json()
          .warnings.map((w: { key: string }) => w.key)
          .sort(),
      ).toEqual(['__proto__', 'constructor', 'toString'].sort());
      expect(({} as Record<string, unknown>).a).toBeUndefined();
    });

    it('refuses text PostgreSQL cannot store in a multipart form, names and values, writing nothing', async () => {
      const before = (await recordsOf(t, account)).length;
      const value = multipart([
        { name: 'entity', value: 'lead' },
        { name: 'fields[email]', value: 'nul@b.co' },
        { name: 'fields[first_name]', value: 'a\u0000b' },
      ]);
      const refusedValue = await post(value.payload, value.contentType);
      expect(refusedValue.statusCode).toBe(422);
      expect(refusedValue.json().details).toEqual([
        expect.objectContaining({ key: 'fields[first_name]', reason: 'invalid_characters' }),
      ]);
      const name = multipart([
        { name: 'entity', value: 'lead' },
        { name: 'fields[email]', value: 'nul2@b.co' },
        { name: 'first\u0000name', value: 'x' },
      ]);
      const refusedName = await post(name.payload, name.contentType);
      expect(refusedName.statusCode).toBe(422);
      expect(refusedName.json().details[0].reason).toBe('invalid_characters');
      expect((await recordsOf(t, account)).length).toBe(before);
    });

    it('checks the token before reading a multipart body', async () => {
      const body = multipart([{ name: 'entity', value: 'lead' }]);
      const answer = await post(body.payload, body.contentType, '/api/v1/in/st_unknown');
      expect(answer.statusCode).toBe(401);
    });
  });
});

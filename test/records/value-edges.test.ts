import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

/**
 * Values at the edges of their types (decisions §3: coerced only where unambiguous, input never
 * changed silently): blanks in a list, whole numbers past 2^53, characters outside the BMP,
 * years below 100 and past 9999, timestamps cut to dates, the phone's 40 characters.
 */
describe.each(TEST_DATABASES)('field values at their edges on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;

  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t, { duplicateRule: { match: ['email'], action: 'update' } });
  });
  afterAll(async () => t?.close());

  const intake = (fields: Record<string, unknown>) =>
    t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: account.apiKey,
      body: { entity: 'lead', fields },
    });
  const read = async (id: string) =>
    (await t.request({ method: 'GET', url: `/api/v1/records/${id}`, key: account.apiKey })).json().fields;

  describe('happy path', () => {
    it('takes a list of blanks as no value: a repeat leaves the stored choice, a PATCH clears it', async () => {
      const created = await intake({ email: 'blanks@b.co', topics: ['Price'] });
      expect(created.statusCode).toBe(201);
      const id = created.json().id;
      for (const topics of [[''], ['', ' '], ',']) {
        const repeat = await intake({ email: 'blanks@b.co', topics });
        expect(repeat.json()).toMatchObject({ id, created: false });
        expect((await read(id)).topics).toEqual(['Price']);
      }
      const patched = await t.request({
        method: 'PATCH',
        url: `/api/v1/records/${id}`,
        key: account.apiKey,
        body: { fields: { topics: [''] } },
      });
      expect(patched.json()).toMatchObject({ updated: true, fields: ['topics'] });
      expect(await read(id)).not.toHaveProperty('topics');
    });

    it('counts text in characters, an emoji as one', async () => {
      const name = '😀'.repeat(6_000);
      const created = await intake({ email: 'emoji@b.co', first_name: name });
      expect(created.statusCode).toBe(201);
      expect((await read(created.json().id)).first_name).toBe(name);
      const tooLong = await intake({ email: 'emoji2@b.co', first_name: '😀'.repeat(10_001) });
      expect(tooLong.statusCode).toBe(422);
      expect(tooLong.json().details).toContainEqual(
        expect.objectContaining({ key: 'first_name', reason: 'too_long' }),
      );
    });

    it('takes dates of the years 1 to 99, and a phone of 40 characters with its +', async () => {
      const created = await intake({
        email: 'old@b.co',
        birthday: '0050-01-01',
        phone: `+${'1'.repeat(39)}`,
      });
      expect(created.statusCode, created.body).toBe(201);
      expect(await read(created.json().id)).toMatchObject({
        birthday: '0050-01-01',
        phone: `+${'1'.repeat(39)}`,
      });
    });

    it('takes a phone of five digits among its signs', async () => {
      const created = await intake({ email: 'five@b.co', phone: '+(1) 2-3.4/5' });
      expect(created.statusCode, created.body).toBe(201);
      expect(await read(created.json().id)).toMatchObject({ phone: '+(1) 2-3.4/5' });
    });
  });

  describe('errors', () => {
    it.each([
      ['a whole number past 2^53 given as text', { rooms: '9007199254740993' }, 'rooms', 'out_of_range'],
      ['a whole number past 2^53 given as a number', { budget: 1e20 }, 'budget', 'out_of_range'],
      [
        'a timestamp with an impossible time cut to a date',
        { birthday: '2026-12-01T99:99Z' },
        'birthday',
        'invalid_format',
      ],
      [
        'a timestamp with an impossible offset',
        { birthday: '2026-12-01T10:00+99:99' },
        'birthday',
        'invalid_format',
      ],
      [
        'a time past the year 9999 in UTC',
        { callback_at: '9999-12-31T23:59:00-01:00' },
        'callback_at',
        'out_of_range',
      ],
      ['a phone of 41 characters', { phone: `+${'1'.repeat(40)}` }, 'phone', 'invalid_format'],
      ['a phone of four digits among its signs', { phone: '+(12) 3-4' }, 'phone', 'invalid_format'],
    ])('refuses %s', async (_label, fields, key, reason) => {
      const response = await intake({ email: 'edge@b.co', ...fields });
      expect(response.statusCode, response.body).toBe(422);
      expect(response.json().details).toContainEqual(expect.objectContaining({ key, reason }));
    });
  });
});

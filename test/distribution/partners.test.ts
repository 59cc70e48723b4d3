import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { distributionAccount, expectRefusedCredentials, wrongCredentials } from './support.ts';

const PARTNERS = '/api/v1/distribution/partners';
const MISSING = '00000000-0000-4000-8000-000000000000';

describe.each(TEST_DATABASES)('distribution: partners on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await distributionAccount(t);
  });
  afterAll(async () => t?.close());

  const call = (
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    url: string,
    body?: unknown,
    key = account.apiKey,
  ) => t.request({ method, url, key, body });
  let counter = 0;
  const unique = (name: string) => `${name} ${++counter}`;
  const create = async (body: Record<string, unknown>) => {
    const response = await call('POST', PARTNERS, { name: unique('Partner'), ...body });
    if (response.statusCode !== 201) throw new Error(`create: ${response.statusCode} ${response.body}`);
    return response.json().id as string;
  };
  const read = async (id: string) => (await call('GET', `${PARTNERS}/${id}`)).json();

  describe('happy path', () => {
    it('creates a partner from snake_case keys and reads it with its gaps', async () => {
      const name = unique('Solar Süd GmbH');
      const created = await call('POST', PARTNERS, {
        name,
        contact_person: 'Ada Lovelace',
        email: 'ada@solar.example',
        phone: '+49 30 123',
        street: 'Hauptstraße 1',
        postal_code: '10115',
        city: 'Berlin',
        country: 'de',
        vat_id: 'de 123 456 789',
      });
      expect(created.statusCode).toBe(201);
      expect(Object.keys(created.json())).toEqual(['id']);
      const partner = await read(created.json().id);
      expect(partner).toMatchObject({
        name,
        contact_person: 'Ada Lovelace',
        country: 'DE',
        vat_id: 'DE123456789',
        billing_address_differs: false,
        billing_name: null,
        wants_e_invoice: false,
        portal_right_contact: 'view',
        portal_right_billing: 'view',
        retired: false,
        gaps: [],
      });
    });

    it('takes the earlier camelCase keys, and both spellings when they agree', async () => {
      const id = await create({
        contactPerson: 'Grace',
        postalCode: '1010',
        vatId: 'atu 1234',
        billingAddressDiffers: true,
        billingName: 'Grace Billing',
        billingStreet: 'Ring 2',
        billingPostalCode: '1010',
        billingCity: 'Wien',
        billingCountry: 'Österreich',
        billingEmail: 'bill@grace.example',
        buyerReference: 'PO-7',
        wantsEInvoice: true,
        city: 'Wien',
        country: 'Austria',
        contact_person: 'Grace',
      });
      expect(await read(id)).toMatchObject({
        contact_person: 'Grace',
        postal_code: '1010',
        vat_id: 'ATU1234',
        billing_address_differs: true,
        billing_name: 'Grace Billing',
        billing_country: 'AT',
        billing_email: 'bill@grace.example',
        buyer_reference: 'PO-7',
        wants_e_invoice: true,
        country: 'AT',
        gaps: [],
      });
    });

    it('resolves countries from codes and names in several languages', async () => {
      for (const [input, code] of [
        ['DE', 'DE'],
        ['fr', 'FR'],
        ['Germany', 'DE'],
        ['  deutschland ', 'DE'],
        ['Schweiz', 'CH'],
        ['Espagne', 'ES'],
        ['United Kingdom', 'GB'],
        // A name of three letters that is no country code.
        ['UAE', 'AE'],
      ] as const) {
        const response = await call('POST', PARTNERS, { name: unique('Country'), country: input });
        expect(response.statusCode, input).toBe(201);
        expect((await read(response.json().id)).country, input).toBe(code);
      }
    });

    it('names the gaps of the address in use, and the buyer reference for e-invoices', async () => {
      const id = await create({ street: 'A 1', city: 'Köln', wants_e_invoice: true });
      expect((await read(id)).gaps).toEqual(['postal_code', 'country', 'email', 'buyer_reference']);
      await call('PATCH', `${PARTNERS}/${id}`, { billing_address_differs: true, billing_city: 'Bonn' });
      expect((await read(id)).gaps).toEqual([
        'billing_street',
        'billing_postal_code',
        'billing_country',
        'billing_email',
        'buyer_reference',
      ]);
      await call('PATCH', `${PARTNERS}/${id}`, { wants_e_invoice: false });
      expect((await read(id)).gaps).not.toContain('buyer_reference');
    });

    it('patches only the keys given; turning billing off keeps the billing fields', async () => {
      const id = await create({
        email: 'keep@p.example',
        city: 'Hamburg',
        billing_address_differs: true,
        billing_street: 'Weg 3',
        billing_email: 'bill@p.example',
      });
      const patched = await call('PATCH', `${PARTNERS}/${id}`, {
        city: 'Bremen',
        billing_address_differs: false,
      });
      expect(patched.statusCode).toBe(200);
      expect(patched.json()).toEqual({ id });
      expect(await read(id)).toMatchObject({
        email: 'keep@p.example',
        city: 'Bremen',
        billing_address_differs: false,
        billing_street: 'Weg 3',
        billing_email: 'bill@p.example',
      });
      await call('PATCH', `${PARTNERS}/${id}`, { billing_street: null, email: '' });
      expect(await read(id)).toMatchObject({ billing_street: null, email: '' });
    });

    it('lists partners matching a term over name, contact, email and city, without retired ones', async () => {
      const tag = `zq${Date.now()}`;
      const byName = await create({ name: `Name ${tag.toUpperCase()}` });
      const byContact = await create({ contact_person: `Contact ${tag}` });
      const byEmail = await create({ email: `${tag}@mail.example` });
      const byCity = await create({ city: `City${tag}` });
      const retired = await create({ city: `Retired ${tag}` });
      await create({ phone: tag });
      expect((await call('DELETE', `${PARTNERS}/${retired}`)).json()).toEqual({ id: retired, retired: true });
      const listed = await call('GET', `${PARTNERS}?q=${tag}`);
      expect(listed.statusCode).toBe(200);
      expect(
        listed
          .json()
          .partner.map((p: { id: string }) => p.id)
          .sort(),
      ).toEqual([byName, byContact, byEmail, byCity].sort());
      expect(listed.json().partner[0]).toHaveProperty('gaps');
      const all = (await call('GET', PARTNERS)).json().partner.map((p: { id: string }) => p.id);
      expect(all).toContain(byName);
      expect(all).not.toContain(retired);
      // LIKE characters are matched as themselves.
      expect((await call('GET', `${PARTNERS}?q=${encodeURIComponent('%')}`)).json().partner).toEqual([]);
    });

    it('pages the list with a cursor', async () => {
      const first = await call('GET', `${PARTNERS}?limit=2`);
      expect(first.json().partner).toHaveLength(2);
      const second = await call('GET', `${PARTNERS}?limit=2&cursor=${first.json().next_cursor}`);
      const ids = [...first.json().partner, ...second.json().partner].map((p: { id: string }) => p.id);
      expect(new Set(ids).size).toBe(ids.length);
    });

    it('retires a partner, which stays readable, and brings it back with retired:false', async () => {
      const id = await create({});
      const retired = await call('DELETE', `${PARTNERS}/${id}`);
      expect(retired.statusCode).toBe(200);
      expect(retired.json()).toEqual({ id, retired: true });
      expect((await read(id)).retired).toBe(true);
      expect((await call('DELETE', `${PARTNERS}/${id}`)).statusCode).toBe(200);
      expect((await call('PATCH', `${PARTNERS}/${id}`, { retired: false })).statusCode).toBe(200);
      expect((await read(id)).retired).toBe(false);
      const listed = (await call('GET', PARTNERS)).json().partner.map((p: { id: string }) => p.id);
      expect(listed).toContain(id);
    });
  });

  describe('errors', () => {
    it('refuses a missing or blank name, unknown keys and overlong text with 422', async () => {
      const cases: [Record<string, unknown>, string, string][] = [
        [{}, 'name', 'required'],
        [{ name: '   ' }, 'name', 'required'],
        [{ name: 'x', nickname: 'y' }, 'nickname', 'not_allowed'],
        [{ name: 'x'.repeat(201) }, 'name', 'too_long'],
        [{ name: 'x', street: 's'.repeat(201) }, 'street', 'too_long'],
        [{ name: 'x', billing_address_differs: 'yes' }, 'billing_address_differs', 'invalid_type'],
        [{ name: 'x', email: 'not-an-email' }, 'email', 'invalid_format'],
        [{ name: 'x', billingEmail: 'nope' }, 'billing_email', 'invalid_format'],
      ];
      for (const [body, key, reason] of cases) {
        const response = await call('POST', PARTNERS, body);
        expect(response.statusCode, JSON.stringify(body)).toBe(422);
        expect(response.json().error).toBe('validation_failed');
        expect(
          response.json().details.map((d: { key: string }) => d.key),
          JSON.stringify(body),
        ).toContain(key);
        if (reason !== 'too_long' && reason !== 'not_allowed' && reason !== 'required')
          expect(response.json().details[0].reason).toBe(reason);
      }
    });

    it('refuses both spellings of one key with different values', async () => {
      const response = await call('POST', PARTNERS, { name: unique('Twice'), vat_id: 'DE1', vatId: 'DE2' });
      expect(response.statusCode).toBe(422);
      expect(response.json().details).toEqual([
        expect.objectContaining({ key: 'vat_id', reason: 'conflicting_keys' }),
      ]);
      const id = await create({});
      const patched = await call('PATCH', `${PARTNERS}/${id}`, {
        billing_address_differs: true,
        billingAddressDiffers: false,
      });
      expect(patched.statusCode).toBe(422);
      expect((await read(id)).billing_address_differs).toBe(false);
    });

    it('refuses an unknown country with reason invalid_country, on create and patch', async () => {
      // Codes are two letters: a three-letter code is refused, even one a language lists as a name (USA).
      for (const body of [
        { country: 'Atlantis' },
        { billing_country: 'XX' },
        { country: 'Congo' },
        { country: 'DEU' },
        { country: 'aut' },
        { country: 'USA' },
        { billing_country: 'usa' },
      ]) {
        const response = await call('POST', PARTNERS, { name: unique('Nowhere'), ...body });
        expect(response.statusCode, JSON.stringify(body)).toBe(422);
        expect(response.json().details[0]).toMatchObject({
          key: Object.keys(body)[0],
          reason: 'invalid_country',
        });
      }
      const id = await create({ country: 'DE' });
      const patched = await call('PATCH', `${PARTNERS}/${id}`, { country: 'Narnia' });
      expect(patched.statusCode).toBe(422);
      expect((await read(id)).country).toBe('DE');
    });

    it('refuses a taken name in any case with 409 partner_name_taken, on create and patch', async () => {
      const name = unique('Taken Name');
      await create({ name });
      const again = await call('POST', PARTNERS, { name: name.toUpperCase() });
      expect(again.statusCode).toBe(409);
      expect(again.json()).toEqual({ error: 'partner_name_taken' });
      const other = await create({});
      const renamed = await call('PATCH', `${PARTNERS}/${other}`, { name: ` ${name.toLowerCase()} ` });
      expect(renamed.statusCode).toBe(409);
      expect(renamed.json()).toEqual({ error: 'partner_name_taken' });
      // Its own name again is no conflict.
      const own = (await read(other)).name;
      expect((await call('PATCH', `${PARTNERS}/${other}`, { name: own })).statusCode).toBe(200);
    });

    it('makes one partner of ten concurrent creations of one name', async () => {
      const name = unique('Concurrent');
      const answers = await Promise.all(
        Array.from({ length: 10 }, () => call('POST', PARTNERS, { name, city: 'Race' })),
      );
      const statuses = answers.map((answer) => answer.statusCode).sort();
      expect(statuses).toEqual([201, 409, 409, 409, 409, 409, 409, 409, 409, 409]);
      for (const answer of answers.filter((a) => a.statusCode === 409)) {
        expect(answer.json()).toEqual({ error: 'partner_name_taken' });
      }
      const listed = (await call('GET', `${PARTNERS}?q=${encodeURIComponent(name)}`)).json().partner;
      expect(listed).toHaveLength(1);
    });

    it('answers 404 for unknown ids on every route', async () => {
      for (const [method, body] of [
        ['GET', undefined],
        ['PATCH', { city: 'X' }],
        ['DELETE', undefined],
      ] as const) {
        const response = await call(method, `${PARTNERS}/${MISSING}`, body);
        expect(response.statusCode, method).toBe(404);
        expect(response.json().error).toBe('not_found');
      }
      expect((await call('GET', `${PARTNERS}/not-a-uuid`)).statusCode).toBe(404);
    });

    it('refuses a cursor it did not issue and an overlong search term', async () => {
      expect((await call('GET', `${PARTNERS}?cursor=abc`)).statusCode).toBe(422);
      expect((await call('GET', `${PARTNERS}?q=${'x'.repeat(201)}`)).statusCode).toBe(422);
    });
  });

  describe('security', () => {
    it('needs an API key with the distribution permission, on an account with the module', async () => {
      const id = await create({});
      const wrong = await wrongCredentials(t, account, 'distribution');
      const routes = [
        ['GET', PARTNERS, undefined],
        ['POST', PARTNERS, { name: unique('Refused') }],
        ['GET', `${PARTNERS}/${id}`, undefined],
        ['PATCH', `${PARTNERS}/${id}`, { city: 'Refused' }],
        ['DELETE', `${PARTNERS}/${id}`, undefined],
      ] as const;
      const without = await t.createAccount({ modules: ['crm'] });
      await expectRefusedCredentials(t, routes, wrong, without);
      expect(await read(id)).toMatchObject({ retired: false, city: '' });
    });

    it("treats another account's partner as not found and never lists it", async () => {
      const other = await distributionAccount(t);
      const theirs = await call('POST', PARTNERS, { name: 'Their Partner', city: 'Elsewhere' }, other.apiKey);
      const id = theirs.json().id;
      for (const [method, body] of [
        ['GET', undefined],
        ['PATCH', { city: 'Mine now' }],
        ['DELETE', undefined],
      ] as const) {
        expect((await call(method, `${PARTNERS}/${id}`, body)).statusCode, method).toBe(404);
      }
      expect((await call('GET', `${PARTNERS}?q=Elsewhere`)).json().partner).toEqual([]);
      // Names are unique per account, not across accounts.
      expect((await call('POST', PARTNERS, { name: 'Their Partner' })).statusCode).toBe(201);
      const still = await call('GET', `${PARTNERS}/${id}`, undefined, other.apiKey);
      expect(still.json()).toMatchObject({ city: 'Elsewhere', retired: false });
    });
  });
});

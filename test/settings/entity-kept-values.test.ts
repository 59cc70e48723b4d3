import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEntitiesRepo } from '../../src/modules/entities/entities.repo.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, entityIdOf, LEAD_ENTITY } from '../helpers/fixtures.ts';

type Field = (typeof LEAD_ENTITY.fields)[number] & { format?: string; options?: string[] };

/** The lead entity with some of its fields changed. */
function leadWith(changes: Record<string, Partial<Field>>) {
  return {
    ...LEAD_ENTITY,
    fields: LEAD_ENTITY.fields.map((field) => ({ ...field, ...(changes[field.key] ?? {}) })),
  };
}
const indexOf = (key: string) => LEAD_ENTITY.fields.findIndex((field) => field.key === key);

/**
 * An entity `PUT` that changes a field's type or format, or takes options away, keeps the stored
 * values as they are and says how many records hold values that may no longer fit.
 */
describe.each(TEST_DATABASES)('values kept through a changed definition on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind);
  });
  afterAll(async () => {
    await t?.close();
  });

  const put = (account: TestAccount, body: object) =>
    t.request({ method: 'PUT', url: '/api/v1/settings/entities/lead', key: account.apiKey, body });
  const create = async (account: TestAccount, fields: Record<string, unknown>) => {
    const response = await t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: account.apiKey,
      body: {
        entity: 'lead',
        fields: { email: `k${Math.random().toString(36).slice(2)}@kept.test`, ...fields },
      },
    });
    expect(response.statusCode, response.body).toBe(201);
    return response.json().id as string;
  };
  const read = async (account: TestAccount, id: string) =>
    (await t.request({ method: 'GET', url: `/api/v1/records/${id}`, key: account.apiKey })).json().fields;

  describe('happy path', () => {
    it('says how many records hold a value of a field whose type changed, and keeps them', async () => {
      const account = await accountWithLeads(t);
      const ids = [await create(account, { company: 'Acme' }), await create(account, { company: '4711' })];
      await create(account, {});
      const changed = await put(
        account,
        leadWith({ company: { type: 'number', format: undefined, role: undefined } }),
      );
      expect(changed.statusCode, changed.body).toBe(200);
      expect(changed.json().warnings).toEqual([
        {
          key: `fields.${indexOf('company')}.type`,
          reason: 'values_kept',
          message:
            '2 records hold a value of company taken in as text; kept as it is, not converted to number',
        },
      ]);
      expect(changed.json().fields[indexOf('company')]).toMatchObject({ key: 'company', type: 'number' });
      expect((await read(account, ids[0]!)).company).toBe('Acme');
      expect((await read(account, ids[1]!)).company).toBe('4711');

      // A kept value does not stand in the way of changing the record's other fields.
      const patched = await t.request({
        method: 'PATCH',
        url: `/api/v1/records/${ids[0]}`,
        key: account.apiKey,
        body: { fields: { first_name: 'Ada' } },
      });
      expect(patched.statusCode, patched.body).toBe(200);
      expect(await read(account, ids[0]!)).toMatchObject({ first_name: 'Ada', company: 'Acme' });
    });

    it('says so for a changed format, keyed by it', async () => {
      const account = await accountWithLeads(t);
      await create(account, { phone: '+49 30 1234567' });
      const changed = await put(account, leadWith({ phone: { format: 'email' } }));
      expect(changed.statusCode, changed.body).toBe(200);
      expect(changed.json().warnings).toEqual([
        {
          key: `fields.${indexOf('phone')}.format`,
          reason: 'values_kept',
          message:
            '1 record holds a value of phone taken in as text (phone); kept as it is, not converted to text (email)',
        },
      ]);
    });

    it('counts the records holding an option taken away, in a select and in a multiselect', async () => {
      const account = await accountWithLeads(t);
      await create(account, { interest: 'Battery' });
      await create(account, { interest: 'Solar', topics: ['Price', 'Funding'] });
      await create(account, { topics: ['Funding'] });
      await create(account, { interest: 'Solar', topics: ['Price'] });
      const changed = await put(
        account,
        leadWith({
          interest: { options: ['Solar', 'Heat pump'] },
          topics: { options: ['Price', 'Installation'] },
        }),
      );
      expect(changed.statusCode, changed.body).toBe(200);
      expect(changed.json().warnings).toEqual([
        {
          key: `fields.${indexOf('interest')}.options`,
          reason: 'values_kept',
          message: '1 record holds an option of interest the definition no longer lists; kept as it is',
        },
        {
          key: `fields.${indexOf('topics')}.options`,
          reason: 'values_kept',
          message: '2 records hold an option of topics the definition no longer lists; kept as it is',
        },
      ]);
    });

    it('counts the records without a value of a field made required, and changes none of them', async () => {
      const account = await accountWithLeads(t);
      const without = await create(account, {});
      await create(account, { company: 'Acme' });
      const changed = await put(account, leadWith({ company: { required: true } }));
      expect(changed.statusCode, changed.body).toBe(200);
      expect(changed.json().warnings).toEqual([
        {
          key: `fields.${indexOf('company')}.required`,
          reason: 'values_missing',
          message: '1 record holds no value of company, which is now required; nothing was filled in',
        },
      ]);
      // Still read, and still changed in its other fields.
      const patched = await t.request({
        method: 'PATCH',
        url: `/api/v1/records/${without}`,
        key: account.apiKey,
        body: { fields: { first_name: 'Bo' } },
      });
      expect(patched.statusCode, patched.body).toBe(200);
      expect(await read(account, without)).not.toHaveProperty('company');
    });

    it('warns of nothing when no stored value is touched: a new entity, the same definition, a change no record holds', async () => {
      const account = await t.createAccount();
      const first = await put(account, LEAD_ENTITY);
      expect(first.statusCode).toBe(200);
      expect(first.json()).not.toHaveProperty('warnings');
      await create(account, { interest: 'Solar' });
      expect((await put(account, LEAD_ENTITY)).json()).not.toHaveProperty('warnings');
      const unheld = await put(
        account,
        leadWith({ budget: { type: 'text', format: undefined }, interest: { options: ['Solar'] } }),
      );
      expect(unheld.statusCode, unheld.body).toBe(200);
      expect(unheld.json()).not.toHaveProperty('warnings');
    });
  });

  describe('bounds', () => {
    it('stops counting past its cap', async () => {
      const account = await accountWithLeads(t);
      for (let i = 0; i < 3; i++) await create(account, { company: `C${i}` });
      const entityId = await entityIdOf(t, account.id, 'lead');
      const repo = createEntitiesRepo(t.db);
      expect(await repo.countHolding(account.id, entityId, 'company', null, 10)).toBe(3);
      expect(await repo.countHolding(account.id, entityId, 'company', null, 1)).toBe(2);
      expect(await repo.countHolding(account.id, entityId, 'company', ['C1', 'C9'], 10)).toBe(1);
    });
  });

  describe('security', () => {
    it("counts only the account's own records", async () => {
      const account = await accountWithLeads(t);
      const other = await accountWithLeads(t);
      await create(other, { company: 'Theirs' });
      const changed = await put(
        account,
        leadWith({ company: { type: 'number', format: undefined, role: undefined } }),
      );
      expect(changed.statusCode).toBe(200);
      expect(changed.json()).not.toHaveProperty('warnings');
    });
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { LEAD_ENTITY } from '../helpers/fixtures.ts';
import { type DistributionWorld, startDistributionWorld } from './support.ts';

const SETUPS = '/api/v1/settings/distributions';
const PARTICIPATIONS = '/api/v1/settings/participations';

/**
 * Settings that could never work are refused rather than stored: a participation a rule names
 * is not removed, a rule names a participation once, a filter condition that can never hold and
 * a currency that is none are answered 422; a test delivery takes no address of its own; a rule
 * stored naming no participation (a removal took it out before) is passed over by runs.
 */
describe.each(TEST_DATABASES)('distribution setup checks on %s', (kind) => {
  let w: DistributionWorld;
  beforeAll(async () => {
    w = await startDistributionWorld(kind);
  });
  afterAll(async () => {
    await w?.close();
  });

  /** An account with a lead distribution set up through the API and two webhook participations. */
  async function setup() {
    const world = await w.account();
    const key = world.account.apiKey;
    const call = (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, body?: unknown) =>
      w.t.request({ method, url, key, body });
    expect((await call('PUT', `${SETUPS}/lead`, {})).statusCode).toBe(200);
    const distributionId = (await call('GET', `${SETUPS}/lead`)).json().id as string;
    const first = await world.webhookPartner(distributionId, { name: 'First' });
    const second = await world.webhookPartner(distributionId, { name: 'Second' });
    const participation = (partnerId: string, body: object = {}) =>
      call('POST', `${SETUPS}/lead/participations`, {
        partner_id: partnerId,
        channel: 'email',
        address: 'leads@partner.example',
        price_cents: 100,
        ...body,
      });
    return { ...world, call, distributionId, first, second, participation };
  }

  it('refuses removing a participation a rule names, naming the rule; the rules read back go back', async () => {
    const s = await setup();
    const rules = [
      {
        name: 'Solar',
        filter: [{ field: 'interest', op: 'equals', value: 'Solar' }],
        strategy: 'all',
        participation_ids: [s.first.participationId],
      },
      { name: 'Fallback', strategy: 'all', participation_ids: [s.second.participationId] },
    ];
    const written = await s.call('PUT', `${SETUPS}/lead/rules`, rules);
    expect(written.statusCode).toBe(200);
    const ruleId = written.json()[0].id;

    const refused = await s.call('DELETE', `${PARTICIPATIONS}/${s.first.participationId}`);
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toMatchObject({
      error: 'conflict',
      reason: 'used_by_rule',
      rule_ids: [ruleId],
      message: expect.stringContaining('distribution rule "Solar" names this participation'),
    });
    const read = (await s.call('GET', `${SETUPS}/lead`)).json();
    expect(read.participations.map((p: { id: string }) => p.id)).toContain(s.first.participationId);
    expect(read.rules).toEqual(written.json());
    // What reads back is taken back as it is.
    const back = read.rules.map(({ id: _, position: __, ...rule }: Record<string, unknown>) => rule);
    expect((await s.call('PUT', `${SETUPS}/lead/rules`, back)).statusCode).toBe(200);

    // Taken out of the rule first, the participation goes.
    expect((await s.call('PUT', `${SETUPS}/lead/rules`, [rules[1]])).statusCode).toBe(200);
    expect((await s.call('DELETE', `${PARTICIPATIONS}/${s.first.participationId}`)).statusCode).toBe(204);
    expect((await s.call('GET', `${SETUPS}/lead`)).json().rules).toMatchObject([
      { name: 'Fallback', participation_ids: [s.second.participationId] },
    ]);
  });

  it('passes over a stored rule that names no participation, so the rules behind it decide', async () => {
    const s = await setup();
    // As a removal left a rule before: it names nothing, and its filter matches every record.
    await s.factory.rule(s.distributionId, { name: 'Emptied', position: 0, participationIds: [] });
    await s.factory.rule(s.distributionId, {
      name: 'Fallback',
      position: 1,
      participationIds: [s.second.participationId],
    });
    const answer = (await s.start(await s.record({ interest: 'Solar' }))).json();
    expect(answer).toMatchObject({ status: 'distributed', partner_names: 'Second' });

    const alone = await setup();
    await alone.factory.rule(alone.distributionId, { name: 'Emptied', participationIds: [] });
    expect((await alone.start(await alone.record())).json()).toMatchObject({
      status: 'no_match',
      reason: 'no_rule_matched',
    });
  });

  it('refuses a rule naming a participation twice', async () => {
    const s = await setup();
    const id = s.first.participationId;
    for (const twice of [
      [id, s.second.participationId, id],
      [id, id.toUpperCase()],
    ]) {
      const response = await s.call('PUT', `${SETUPS}/lead/rules`, [
        { name: 'Twice', strategy: 'round_robin', participation_ids: twice },
      ]);
      expect(response.statusCode, JSON.stringify(twice)).toBe(422);
      expect(response.json().details).toEqual([
        {
          key: '0.participation_ids',
          reason: 'duplicate',
          message: expect.stringContaining('more than once'),
        },
      ]);
    }
    expect((await s.call('GET', `${SETUPS}/lead`)).json().rules).toEqual([]);
  });

  it('refuses filter conditions that can never hold: a range upside down, a value no option has', async () => {
    const s = await setup();
    const rule = (filter: object[]) => [
      { name: 'R', filter, strategy: 'all', participation_ids: [s.first.participationId] },
    ];
    const cases: [object, string, string][] = [
      [{ field: 'budget', op: 'range', min: 5000, max: 1000 }, '0.filter.0.min', 'invalid_range'],
      [{ field: 'budget', op: 'range', min: '5000', max: 999 }, '0.filter.0.min', 'invalid_range'],
      [
        { field: 'birthday', op: 'range', min: '2025-02-01', max: '2025-01-31' },
        '0.filter.0.min',
        'invalid_range',
      ],
      [{ field: 'interest', op: 'equals', value: 'Wind' }, '0.filter.0.value', 'unknown_option'],
      [{ field: 'interest', op: 'equals', value: 1 }, '0.filter.0.value', 'unknown_option'],
      [{ field: 'interest', op: 'in', values: ['Solar', 'Wind'] }, '0.filter.0.values.1', 'unknown_option'],
      [{ field: 'topics', op: 'equals', value: 'Pricing' }, '0.filter.0.value', 'unknown_option'],
    ];
    for (const [condition, key, reason] of cases) {
      const response = await s.call('PUT', `${SETUPS}/lead/rules`, rule([condition]));
      const label = JSON.stringify(condition);
      expect(response.statusCode, label).toBe(422);
      expect(response.json().details, label).toEqual([{ key, reason, message: expect.any(String) }]);
    }
    expect((await s.call('GET', `${SETUPS}/lead`)).json().rules).toEqual([]);

    // Bounds that meet, one bound alone, an option in another case or spacing: taken as sent.
    const taken = [
      { field: 'budget', op: 'range', min: 1000, max: 1000 },
      { field: 'budget', op: 'range', min: 5000 },
      { field: 'birthday', op: 'range', min: '2025-01-01', max: '2025-12-31' },
      { field: 'interest', op: 'equals', value: ' heat PUMP ' },
      { field: 'interest', op: 'in', values: ['solar', 'Battery'] },
      { field: 'topics', op: 'equals', value: 'price' },
      { field: 'company', op: 'equals', value: 'Wind' },
    ];
    for (const condition of taken) {
      const response = await s.call('PUT', `${SETUPS}/lead/rules`, rule([condition]));
      expect(response.statusCode, `${JSON.stringify(condition)}: ${response.body}`).toBe(200);
      expect(response.json()[0].filter).toEqual([condition]);
    }
  });

  it("refuses an entity change that takes away a select option a rule's equals or in names", async () => {
    const s = await setup();
    const written = await s.call('PUT', `${SETUPS}/lead/rules`, [
      {
        name: 'Solar or battery',
        filter: [
          { field: 'company', op: 'equals', value: 'Solar AG' },
          { field: 'interest', op: 'in', values: ['Heat pump', 'solar'] },
          { field: 'topics', op: 'equals', value: 'Funding' },
        ],
        strategy: 'all',
        participation_ids: [s.first.participationId],
      },
    ]);
    expect(written.statusCode, written.body).toBe(200);
    const ruleId = written.json()[0].id as string;
    const withFields = (change: (field: { key: string; type: string; options?: string[] }) => object) => ({
      ...LEAD_ENTITY,
      fields: LEAD_ENTITY.fields.map((field) => change(field)),
    });

    // Solar and Funding go: both conditions that name them are refused, each at its value.
    const refused = await s.call(
      'PUT',
      '/api/v1/settings/entities/lead',
      withFields((field) =>
        field.key === 'interest'
          ? { ...field, options: ['Heat pump', 'Battery'] }
          : field.key === 'topics'
            ? { ...field, options: ['Price'] }
            : field,
      ),
    );
    expect(refused.statusCode, refused.body).toBe(422);
    expect(refused.json().details).toEqual([
      {
        key: `distribution_rules.${ruleId}.filter.1.values.1`,
        reason: 'used_by_rule',
        message: expect.stringContaining('distribution rule "Solar or battery" filters on interest solar'),
      },
      {
        key: `distribution_rules.${ruleId}.filter.2.value`,
        reason: 'used_by_rule',
        message: expect.stringContaining('topics Funding'),
      },
    ]);
    const stored = (await s.call('GET', '/api/v1/settings/entities/lead')).json();
    expect(stored.fields.find((f: { key: string }) => f.key === 'interest').options).toContain('Solar');

    // Options the rule does not name, a renamed case of one it does, or a type that takes any
    // value: taken.
    const taken = [
      withFields((field) =>
        field.key === 'interest' ? { ...field, options: ['SOLAR', 'Heat pump'] } : field,
      ),
      withFields((field) =>
        field.key === 'topics' ? { ...field, type: 'text', options: undefined } : field,
      ),
    ];
    for (const definition of taken) {
      const response = await s.call('PUT', '/api/v1/settings/entities/lead', definition);
      expect(response.statusCode, response.body).toBe(200);
    }
  });

  it('refuses a currency that is no ISO 4217 currency, before the one-currency rule', async () => {
    const s = await setup();
    const partnerId = await s.factory.partner({ name: 'Priced' });
    const before = (await s.call('GET', `${SETUPS}/lead`)).json().participations;
    for (const currency of ['XYZ', 'XAU', 'XXX', 'ABC']) {
      const response = await s.participation(partnerId, { currency });
      expect(response.statusCode, currency).toBe(422);
      expect(response.json().details, currency).toEqual([
        { key: 'currency', reason: 'invalid_currency', message: expect.stringContaining(currency) },
      ]);
    }
    expect((await s.call('GET', `${SETUPS}/lead`)).json().participations).toEqual(before);
    const patched = await s.call('PATCH', `${PARTICIPATIONS}/${s.first.participationId}`, {
      currency: 'XYZ',
    });
    expect(patched.statusCode).toBe(422);
    expect(patched.json().details).toEqual([expect.objectContaining({ reason: 'invalid_currency' })]);

    // A real one still meets the one-currency rule; in a distribution of its own it is taken.
    const other = await s.participation(partnerId, { currency: 'CHF' });
    expect(other.json().details).toEqual([expect.objectContaining({ reason: 'currency_mismatch' })]);
    const fresh = await w.account();
    const put = (url: string, body: object) =>
      w.t.request({ method: url.endsWith('lead') ? 'PUT' : 'POST', url, key: fresh.account.apiKey, body });
    expect((await put(`${SETUPS}/lead`, {})).statusCode).toBe(200);
    // First in an empty distribution, where XYZ was taken and then set the currency for all.
    for (const currency of ['XYZ', 'VED', 'CHF']) {
      const partner = await fresh.factory.partner({ name: currency });
      const made = await put(`${SETUPS}/lead/participations`, {
        partner_id: partner,
        channel: 'email',
        address: 'a@partner.example',
        price_cents: 1,
        currency,
      });
      if (currency === 'XYZ') {
        expect(made.json().details).toEqual([expect.objectContaining({ reason: 'invalid_currency' })]);
      } else if (currency === 'VED') {
        expect(made.statusCode, made.body).toBe(201);
        expect(made.json().currency).toBe('VED');
      } else {
        expect(made.json().details).toEqual([expect.objectContaining({ reason: 'currency_mismatch' })]);
      }
    }
  });

  it('takes no address for a test delivery: a body with any key is refused, none or {} is taken', async () => {
    const s = await setup();
    const evil = await w.receiver();
    const url = `/api/v1/distribution/participations/${s.first.participationId}/test`;
    const test = (body?: unknown) => w.t.request({ method: 'POST', url, key: s.account.apiKey, body });
    for (const body of [{ address: evil.url }, { url: evil.url }, { dry_run: true }]) {
      const refused = await test(body);
      expect(refused.statusCode, JSON.stringify(body)).toBe(422);
      expect(refused.json().details).toEqual([
        expect.objectContaining({ key: Object.keys(body)[0], reason: 'unknown_key' }),
      ]);
    }
    expect(s.first.receiver.received).toHaveLength(0);
    for (const body of [['x'], [{ address: 'x' }]]) {
      const refused = await test(body);
      expect(refused.statusCode, JSON.stringify(body)).toBe(422);
      expect(refused.json().details).toEqual([
        expect.objectContaining({ key: 'body', reason: 'invalid_type' }),
      ]);
    }
    expect(s.first.receiver.received).toHaveLength(0);
    // No body, `{}`, and an empty body labelled JSON (the route still takes none) are all no body.
    const empty = () =>
      w.t.request({
        method: 'POST',
        url,
        key: s.account.apiKey,
        headers: { 'content-type': 'application/json' },
        payload: '',
      });
    for (const send of [() => test(), () => test({}), empty]) {
      const sent = await send();
      expect(sent.statusCode, sent.body).toBe(200);
      expect(sent.json()).toMatchObject({ ok: true, request: { url: s.first.receiver.url } });
    }
    expect(s.first.receiver.received).toHaveLength(3);
    expect(evil.received).toHaveLength(0);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { waitFor } from '../outbound/receiver.ts';
import { type DistributionWorld, startDistributionWorld } from './support.ts';

describe.each(TEST_DATABASES)('distribution runs on %s', (kind) => {
  let w: DistributionWorld;
  beforeAll(async () => {
    w = await startDistributionWorld(kind);
  });
  afterAll(async () => {
    await w?.close();
  });

  const deliveryCounts = async (accountKey: string) => {
    const list = await w.t.request({
      method: 'GET',
      url: '/api/v1/distribution/deliveries',
      key: accountKey,
    });
    expect(list.statusCode).toBe(200);
    const counts: Record<string, number> = {};
    for (const delivery of list.json().deliveries)
      counts[delivery.partner] = (counts[delivery.partner] ?? 0) + 1;
    return counts;
  };

  it('distributes a record to a webhook partner, signed, and answers after the first attempt', async () => {
    const { account, factory, record, start, webhookPartner, subscribe } = await w.account();
    const subscriber = await subscribe(['delivery.delivered']);
    const distributionId = await factory.distribution('lead');
    const partner = await webhookPartner(distributionId, { name: 'Solar Nord', priceCents: 2500 });
    await factory.rule(distributionId, { name: 'Everyone', participationIds: [partner.participationId] });
    const recordId = await record({ first_name: 'Erika', last_name: 'Muster', interest: 'Solar' });

    const started = await start(recordId);
    expect(started.statusCode).toBe(200);
    const answer = started.json();
    expect(answer).toEqual({
      status: 'distributed',
      reason: null,
      partner_count: 1,
      partner_names: 'Solar Nord',
      partner: [
        {
          name: 'Solar Nord',
          email: expect.any(String),
          phone: '+49 30 555',
          city: 'Berlin',
          price_cents: 2500,
          channel: 'webhook',
          status: 'delivered',
        },
      ],
      price_total: 2500,
      run_id: expect.any(String),
    });
    expect(partner.receiver.invalid).toEqual([]);
    expect(partner.receiver.received).toHaveLength(1);
    const body = partner.receiver.received[0]!.json;
    expect(body).toMatchObject({
      type: 'record.delivered',
      timestamp: expect.any(String),
      data: {
        delivery_id: expect.any(String),
        record: {
          id: recordId,
          entity: 'lead',
          name: 'Erika Muster',
          fields: { first_name: 'Erika', interest: 'Solar' },
          source: 'api',
          created_at: expect.any(String),
        },
        price_cents: 2500,
        currency: 'EUR',
      },
    });

    const run = await w.t.request({
      method: 'GET',
      url: `/api/v1/distribution/distributions/${answer.run_id}`,
      key: account.apiKey,
    });
    expect(run.statusCode).toBe(200);
    expect(run.json()).toMatchObject({
      id: answer.run_id,
      status: 'decided',
      record_id: recordId,
      triggered_by: 'api',
      deliveries: [
        {
          id: body.data.delivery_id,
          status: 'delivered',
          partner: 'Solar Nord',
          price_cents: 2500,
          currency: 'EUR',
          attempts: 1,
        },
      ],
    });
    expect(run.json().deliveries[0]).not.toHaveProperty('rule');
    expect(run.json().deliveries[0]).not.toHaveProperty('record_id');

    const history = await w.t.request({
      method: 'GET',
      url: `/api/v1/records/${recordId}/history`,
      key: account.apiKey,
    });
    const distributed = history.json().events.find((e: { type: string }) => e.type === 'distributed');
    expect(distributed).toMatchObject({
      message: 'Distributed to Solar Nord',
      data: { run_id: answer.run_id, partners: ['Solar Nord'], triggered_by: 'api' },
    });
    expect(
      (await w.t.request({ method: 'GET', url: `/api/v1/records/${recordId}`, key: account.apiKey }))
        .statusCode,
    ).toBe(200);

    // An account webhook learns of the delivery.
    await waitFor(() => subscriber.received.length >= 1, 10_000, 'delivery.delivered');
    expect(subscriber.received[0]!.json).toMatchObject({
      type: 'delivery.delivered',
      data: { delivery: { id: body.data.delivery_id, status: 'delivered', record_id: recordId } },
    });

    // A record goes out once.
    const again = await start(recordId);
    expect(again.json()).toMatchObject({
      status: 'no_match',
      reason: 'already_distributed',
      partner_count: 0,
      partner: [],
      price_total: 0,
    });
    expect(partner.receiver.received).toHaveLength(1);
  });

  it('sends an email delivery with the fields by label, escaped in HTML', async () => {
    const { account, factory, record, start } = await w.account();
    const distributionId = await factory.distribution('lead');
    const partnerId = await factory.partner({ name: 'Mail Partner' });
    const participation = await factory.participation(distributionId, {
      partnerId,
      channel: 'email',
      address: 'leads@partner.test',
      priceCents: 700,
    });
    await factory.rule(distributionId, { participationIds: [participation.id] });
    const recordId = await record({ first_name: 'Max', last_name: 'Power', message: '<b>hi</b> & bye' });
    const answer = (await start(recordId)).json();
    expect(answer).toMatchObject({
      status: 'distributed',
      partner: [{ name: 'Mail Partner', channel: 'email', status: 'delivered', price_cents: 700 }],
    });
    const mail = w.smtp.received.find((m) => m.subject === 'New lead: Max Power');
    expect(mail).toBeDefined();
    const run = (
      await w.t.request({
        method: 'GET',
        url: `/api/v1/distribution/distributions/${answer.run_id}`,
        key: account.apiKey,
      })
    ).json();
    expect(mail!.text).toContain('First name: Max');
    expect(mail!.text).toContain('Message: <b>hi</b> & bye');
    expect(mail!.text).toContain(`Delivery: ${run.deliveries[0].id}`);
    expect(mail!.html).toContain('&lt;b&gt;hi&lt;/b&gt; &amp; bye');
    expect(mail!.html).not.toContain('<b>hi</b>');
  });

  it('chooses by the first matching rule: equals, in, range and postal prefix', async () => {
    const { factory, record, start, webhookPartner } = await w.account();
    const distributionId = await factory.distribution('lead');
    const solar = await webhookPartner(distributionId, { name: 'Solar' });
    const budget = await webhookPartner(distributionId, { name: 'Budget' });
    const north = await webhookPartner(distributionId, { name: 'North' });
    const rest = await webhookPartner(distributionId, { name: 'Rest' });
    await factory.rule(distributionId, {
      name: 'solar in topics',
      position: 0,
      filter: [
        { field: 'interest', op: 'equals', value: 'solar' },
        { field: 'topics', op: 'in', values: ['Funding', 'Price'] },
      ],
      participationIds: [solar.participationId],
    });
    await factory.rule(distributionId, {
      name: 'big budget',
      position: 1,
      filter: [{ field: 'budget', op: 'range', min: 10_000, max: 50_000 }],
      participationIds: [budget.participationId],
    });
    await factory.rule(distributionId, {
      name: 'north',
      position: 2,
      filter: [{ field: 'utm_source', op: 'postal_prefix', prefix: '2 0' }],
      participationIds: [north.participationId],
    });
    await factory.rule(distributionId, {
      name: 'only heat pumps',
      position: 3,
      filter: [{ field: 'interest', op: 'equals', value: 'Heat pump' }],
      participationIds: [rest.participationId],
    });
    const names = async (fields: Record<string, unknown>) => (await start(await record(fields))).json();
    expect((await names({ interest: 'Solar', topics: ['Price'] })).partner_names).toBe('Solar');
    // Solar without a listed topic falls to the next rule that matches.
    expect((await names({ interest: 'Solar', budget: 20_000 })).partner_names).toBe('Budget');
    expect((await names({ budget: 9_999.5, utm_source: '20457' })).partner_names).toBe('North');
    expect((await names({ interest: 'Heat pump' })).partner_names).toBe('Rest');
    expect(await names({ interest: 'Battery' })).toMatchObject({
      status: 'no_match',
      reason: 'no_rule_matched',
      partner_count: 0,
    });
  });

  it('skips retired partners, paused participations and those outside their schedule', async () => {
    const { factory, record, start, webhookPartner } = await w.account();
    const distributionId = await factory.distribution('lead');
    const retiredPartner = await factory.partner({ name: 'Retired', retired: true });
    const retired = await factory.participation(distributionId, {
      partnerId: retiredPartner,
      address: (await w.receiver()).url,
    });
    const paused = await webhookPartner(distributionId, { name: 'Paused', paused: true });
    // Today in the UTC+14 zone is never today in the UTC-11 zone: a schedule there is closed now.
    const kiritimatiDay = weekdayIn('Pacific/Kiritimati');
    const closed = await webhookPartner(distributionId, {
      name: 'Closed',
      schedule: { time_zone: 'Pacific/Pago_Pago', weekdays: [kiritimatiDay], from: '00:00', to: '00:00' },
    });
    await factory.rule(distributionId, {
      participationIds: [retired.id, paused.participationId, closed.participationId],
      maxPartners: 3,
    });
    expect((await start(await record())).json()).toMatchObject({
      status: 'no_match',
      reason: 'no_active_participation',
    });
    const open = await webhookPartner(distributionId, {
      name: 'Open',
      schedule: { time_zone: 'Pacific/Kiritimati', weekdays: [kiritimatiDay], from: '00:00', to: '00:00' },
    });
    await factory.rule(distributionId, { position: -1, participationIds: [open.participationId] });
    expect((await start(await record())).json()).toMatchObject({
      status: 'distributed',
      partner_names: 'Open',
    });
  });

  it('follows each strategy and max_partners', async () => {
    const { account, factory, record, start, webhookPartner } = await w.account();
    const distributionId = await factory.distribution('lead');
    const a = await webhookPartner(distributionId, { name: 'A', priceCents: 300, weight: 3 });
    const b = await webhookPartner(distributionId, { name: 'B', priceCents: 100, weight: 1 });
    const c = await webhookPartner(distributionId, { name: 'C', priceCents: 200, weight: 1 });
    const ids = [a.participationId, b.participationId, c.participationId];
    const rule = (strategy: string, value: string, maxPartners = 1) =>
      factory.rule(distributionId, {
        name: strategy,
        strategy,
        maxPartners,
        filter: [{ field: 'company', op: 'equals', value }],
        participationIds: ids,
      });
    await rule('all', 'all', 2);
    await rule('cheapest', 'cheapest');
    await rule('priciest', 'priciest', 2);
    await rule('round_robin', 'rr');
    await rule('weighted', 'weighted');
    const run = async (company: string) => (await start(await record({ company }))).json();

    const all = await run('all');
    expect(all).toMatchObject({ partner_count: 2, partner_names: 'A, B', price_total: 400 });
    expect((await run('cheapest')).partner_names).toBe('B');
    expect((await run('priciest')).partner_names).toBe('A, C');
    const turns = [];
    for (let i = 0; i < 6; i++) turns.push((await run('rr')).partner_names);
    expect(turns).toEqual(['A', 'B', 'C', 'A', 'B', 'C']);
    // Smooth weighted round robin with weights 3, 1, 1: A B A C A, deterministic.
    const weighted = [];
    for (let i = 0; i < 5; i++) weighted.push((await run('weighted')).partner_names);
    expect(weighted).toEqual(['A', 'B', 'A', 'C', 'A']);
    const list = (
      await w.t.request({
        method: 'GET',
        url: '/api/v1/distribution/deliveries?limit=500',
        key: account.apiKey,
      })
    ).json().deliveries;
    expect(list.filter((d: { rule: string }) => d.rule === 'weighted')).toHaveLength(5);
  });

  it('hands a record to each partner once per run, whatever participations it has', async () => {
    const { account, factory, record, start, webhookPartner } = await w.account();
    const distributionId = await factory.distribution('lead');
    // Beta takes part twice (a webhook and an email address), Gamma once.
    const beta = await webhookPartner(distributionId, { name: 'Beta AG', priceCents: 700 });
    const betaEmail = await factory.participation(distributionId, {
      partnerId: beta.partnerId,
      channel: 'email',
      address: 'beta@partner.test',
      priceCents: 500,
    });
    // A third participation of Beta's that is at its cap (a cap of 0 takes nothing).
    const betaFull = await factory.participation(distributionId, {
      partnerId: beta.partnerId,
      channel: 'email',
      address: 'full@partner.test',
      priceCents: 100,
      capPerDay: 0,
    });
    const gamma = await webhookPartner(distributionId, { name: 'Gamma', priceCents: 300 });
    const rule = (strategy: string, value: string, participationIds: string[], maxPartners = 3) =>
      factory.rule(distributionId, {
        name: value,
        strategy,
        maxPartners,
        filter: [{ field: 'company', op: 'equals', value }],
        participationIds,
      });
    await rule('all', 'all', [betaEmail.id, beta.participationId, gamma.participationId]);
    await rule('priciest', 'priciest', [betaEmail.id, beta.participationId, gamma.participationId], 2);
    await rule('all', 'stand-in', [betaFull.id, beta.participationId, gamma.participationId]);
    const run = async (company: string) => (await start(await record({ company }))).json();

    // `all`: Beta's first participation in the list (email), then Gamma; Beta's webhook is passed over.
    const all = await run('all');
    expect(all).toMatchObject({ status: 'distributed', partner_count: 2, partner_names: 'Beta AG, Gamma' });
    expect(all.partner.map((p: { channel: string }) => p.channel)).toEqual(['email', 'webhook']);
    expect(all.price_total).toBe(800);
    expect(beta.receiver.received).toHaveLength(0);
    // `priciest`: Beta's dearest (the webhook at 700), then Gamma, not Beta's email at 500.
    expect(await run('priciest')).toMatchObject({ partner_names: 'Beta AG, Gamma', price_total: 1000 });
    await waitFor(() => beta.receiver.received.length === 1);
    // A participation at its cap leaves the partner's next one in order to stand in.
    const standIn = await run('stand-in');
    expect(standIn).toMatchObject({ partner_names: 'Beta AG, Gamma', price_total: 1000 });
    expect(standIn.partner.map((p: { channel: string }) => p.channel)).toEqual(['webhook', 'webhook']);
    await waitFor(() => beta.receiver.received.length === 2);
    const runs = (
      await w.t.request({ method: 'GET', url: '/api/v1/distribution/deliveries', key: account.apiKey })
    ).json().deliveries;
    const byRecord = new Map<string, string[]>();
    for (const d of runs) byRecord.set(d.record_id, [...(byRecord.get(d.record_id) ?? []), d.partner_id]);
    for (const partners of byRecord.values()) expect(new Set(partners).size).toBe(partners.length);
  });

  it('hands a record out in one currency, also where older participations differ', async () => {
    const { factory, record, start, webhookPartner } = await w.account();
    const distributionId = await factory.distribution('lead');
    // Written straight into the table, as rows from before one currency per distribution may be.
    const euro = await webhookPartner(distributionId, { name: 'Euro', priceCents: 500, currency: 'EUR' });
    const dollar = await webhookPartner(distributionId, { name: 'Dollar', priceCents: 700, currency: 'USD' });
    const euro2 = await webhookPartner(distributionId, {
      name: 'Euro Too',
      priceCents: 200,
      currency: 'EUR',
    });
    await factory.rule(distributionId, {
      strategy: 'all',
      maxPartners: 3,
      participationIds: [euro.participationId, dollar.participationId, euro2.participationId],
    });
    const answer = (await start(await record())).json();
    expect(answer).toMatchObject({ partner_count: 2, partner_names: 'Euro, Euro Too', price_total: 700 });
    expect(dollar.receiver.received).toHaveLength(0);
  });

  it('shares records fairly under concurrency: 30 starts over 3 round-robin participations', async () => {
    const { account, factory, record, start, webhookPartner } = await w.account();
    const distributionId = await factory.distribution('lead');
    const partners = [];
    for (const name of ['P1', 'P2', 'P3']) partners.push(await webhookPartner(distributionId, { name }));
    await factory.rule(distributionId, {
      strategy: 'round_robin',
      participationIds: partners.map((p) => p.participationId),
    });
    const records = [];
    for (let i = 0; i < 30; i++) records.push(await record());
    const answers = await Promise.all(records.map((id) => start(id)));
    expect(answers.every((a) => a.json().status === 'distributed')).toBe(true);
    const counts = await deliveryCounts(account.apiKey);
    for (const name of ['P1', 'P2', 'P3']) {
      expect(counts[name]).toBeGreaterThanOrEqual(9);
      expect(counts[name]).toBeLessThanOrEqual(11);
    }
    expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(30);
  });

  it('never passes a cap under concurrency: 20 starts against a day cap of 5', async () => {
    const { account, factory, record, start, webhookPartner } = await w.account();
    const distributionId = await factory.distribution('lead');
    const capped = await webhookPartner(distributionId, { name: 'Capped', capPerDay: 5 });
    await factory.rule(distributionId, { participationIds: [capped.participationId] });
    const records = [];
    for (let i = 0; i < 20; i++) records.push(await record());
    const answers = (await Promise.all(records.map((id) => start(id)))).map((a) => a.json());
    expect(answers.filter((a) => a.status === 'distributed')).toHaveLength(5);
    expect(answers.filter((a) => a.reason === 'caps_reached')).toHaveLength(15);
    expect(await deliveryCounts(account.apiKey)).toEqual({ Capped: 5 });
    expect(capped.receiver.received).toHaveLength(5);
  });

  it('holds a month cap beside the day cap', async () => {
    const { factory, record, start, webhookPartner } = await w.account();
    const distributionId = await factory.distribution('lead');
    const monthly = await webhookPartner(distributionId, { name: 'Monthly', capPerDay: 10, capPerMonth: 2 });
    const spare = await webhookPartner(distributionId, { name: 'Spare' });
    await factory.rule(distributionId, {
      strategy: 'cheapest',
      participationIds: [monthly.participationId, spare.participationId],
    });
    const names = [];
    for (let i = 0; i < 4; i++) names.push((await start(await record())).json().partner_names);
    // Equal prices take turns; once Monthly is full, Spare takes every record.
    expect(names.filter((n) => n === 'Monthly')).toHaveLength(2);
    expect(names.filter((n) => n === 'Spare')).toHaveLength(2);
    names.length = 0;
    for (let i = 0; i < 2; i++) names.push((await start(await record())).json().partner_names);
    expect(names).toEqual(['Spare', 'Spare']);
  });
});

/** Today's weekday (1 = Monday) in a time zone. */
function weekdayIn(timeZone: string): number {
  const day = new Intl.DateTimeFormat('en-US', { timeZone, weekday: 'short' }).format(new Date());
  return ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'].indexOf(day) + 1;
}

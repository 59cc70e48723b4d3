import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { waitFor } from '../outbound/receiver.ts';
import { type DistributionWorld, startDistributionWorld } from './support.ts';

const UNKNOWN = '00000000-0000-4000-8000-000000000000';

describe.each(TEST_DATABASES)('distribution triggers and security on %s', (kind) => {
  let w: DistributionWorld;
  beforeAll(async () => {
    w = await startDistributionWorld(kind, { queue: {} });
  });
  afterAll(async () => {
    await w?.close();
  });

  async function setup(modules = ['distribution']) {
    const world = await w.account(modules);
    const distributionId = await world.factory.distribution('lead');
    const one = await world.webhookPartner(distributionId, { name: 'One', priceCents: 1200 });
    const two = await world.webhookPartner(distributionId, { name: 'Two', priceCents: 800 });
    await world.factory.rule(distributionId, {
      strategy: 'cheapest',
      participationIds: [one.participationId, two.participationId],
    });
    return { ...world, distributionId, one, two };
  }

  describe('intake node', () => {
    it('distributes a record taken in with the node, and answers like the start call', async () => {
      const s = await setup();
      const response = await w.t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: s.account.apiKey,
        body: { entity: 'lead', fields: { email: 'node@lead.test' }, distribution: {} },
      });
      expect(response.statusCode).toBe(201);
      const body = response.json();
      expect(body).toMatchObject({
        created: true,
        warnings: [],
        distribution: {
          status: 'distributed',
          reason: null,
          partner_count: 1,
          partner_names: 'Two',
          partner: [{ name: 'Two', price_cents: 800, channel: 'webhook', status: 'delivered' }],
          price_total: 800,
          run_id: expect.any(String),
        },
      });
      const run = (
        await w.t.request({
          method: 'GET',
          url: `/api/v1/distribution/distributions/${body.distribution.run_id}`,
          key: s.account.apiKey,
        })
      ).json();
      expect(run).toMatchObject({ triggered_by: 'intake', record_id: body.id });
      expect(s.two.receiver.received[0]!.json.data.record.id).toBe(body.id);
    });

    it('limits the choice to partner_ids, warns of unknown ones, and replays the final answer', async () => {
      const s = await setup();
      const response = await w.t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: s.account.apiKey,
        headers: { 'idempotency-key': 'node-once' },
        body: {
          entity: 'lead',
          fields: { email: 'limited@lead.test' },
          distribution: { partner_ids: [s.one.partnerId, UNKNOWN] },
        },
      });
      const body = response.json();
      expect(body.distribution).toMatchObject({ partner_names: 'One', partner: [{ status: 'delivered' }] });
      expect(body.warnings).toEqual([
        { key: 'distribution.partner_ids', reason: 'unknown_partner', message: `no partner ${UNKNOWN}` },
      ]);
      const replay = await w.t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: s.account.apiKey,
        headers: { 'idempotency-key': 'node-once' },
        body: {
          entity: 'lead',
          fields: { email: 'limited@lead.test' },
          distribution: { partner_ids: [s.one.partnerId, UNKNOWN] },
        },
      });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.json()).toEqual(body);
      expect(s.one.receiver.received).toHaveLength(1);
    });

    it('makes a repeat sent while the first waits for its deliveries wait for the first answer', async () => {
      const s = await setup();
      // The cheapest partner answers after 1.5 s: the first call waits for it (decisions §8).
      s.two.receiver.answerNext({ status: 200, delayMs: 1_500 });
      const send = () =>
        w.t.request({
          method: 'POST',
          url: '/api/v1/records',
          key: s.account.apiKey,
          headers: { 'idempotency-key': 'node-waits' },
          body: { entity: 'lead', fields: { email: 'waits@lead.test' }, distribution: {} },
        });
      const first = send();
      // The repeat comes once the first has committed its record and is waiting for the delivery.
      await waitFor(() => s.two.receiver.received.length === 1);
      const repeat = await send();
      const answer = await first;
      expect(answer.json().distribution.partner).toEqual([expect.objectContaining({ status: 'delivered' })]);
      expect(repeat.headers['idempotent-replayed']).toBe('true');
      expect(repeat.json()).toEqual(answer.json());
      expect(s.two.receiver.received).toHaveLength(1);
    });

    it('distributes bulk entries and source-token intake, and warns without a distribution or module', async () => {
      const s = await setup();
      const bulk = await w.t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key: s.account.apiKey,
        body: {
          records: [
            { entity: 'lead', fields: { email: 'b1@lead.test' }, distribution: {} },
            { entity: 'lead', fields: { email: 'b2@lead.test' } },
            { entity: 'lead', fields: { email: 'b3@lead.test' }, distribution: {} },
          ],
        },
      });
      expect(bulk.statusCode).toBe(200);
      const results = bulk.json().results;
      expect(results[0].distribution).toMatchObject({ status: 'distributed', partner_count: 1 });
      expect(results[1]).not.toHaveProperty('distribution');
      expect(results[2].distribution).toMatchObject({ status: 'distributed', partner_count: 1 });

      const source = await w.t.request({
        method: 'POST',
        url: '/api/v1/settings/sources',
        key: s.account.apiKey,
        body: { name: 'Website' },
      });
      const viaToken = await w.t.request({
        method: 'POST',
        url: `/api/v1/in/${source.json().token}`,
        body: { entity: 'lead', fields: { email: 'form@lead.test' }, distribution: {} },
      });
      expect(viaToken.statusCode).toBe(201);
      expect(viaToken.json().distribution).toMatchObject({ status: 'distributed' });
      const history = (
        await w.t.request({
          method: 'GET',
          url: `/api/v1/records/${viaToken.json().id}/history`,
          key: s.account.apiKey,
        })
      ).json().events;
      expect(history.find((e: { type: string }) => e.type === 'distributed').actor).toEqual({
        type: 'source',
        name: 'Website',
      });

      await w.t.db
        .updateTable('distributions')
        .set({ enabled: false })
        .where('id', '=', s.distributionId)
        .execute();
      const disabled = await w.t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: s.account.apiKey,
        body: { entity: 'lead', fields: { email: 'off@lead.test' }, distribution: {} },
      });
      expect(disabled.statusCode).toBe(201);
      expect(disabled.json()).not.toHaveProperty('distribution');
      expect(disabled.json().warnings).toEqual([
        { key: 'distribution', reason: 'no_distribution', message: 'no distribution is set up for lead' },
      ]);

      const without = await w.account([]);
      const notBooked = await w.t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: without.account.apiKey,
        body: { entity: 'lead', fields: { email: 'nomodule@lead.test' }, distribution: {} },
      });
      expect(notBooked.statusCode).toBe(201);
      expect(notBooked.json().warnings).toEqual([
        {
          key: 'distribution',
          reason: 'module_not_enabled',
          message: 'the distribution module is not enabled',
        },
      ]);
    });
  });

  describe('intake node through a source token (a public form)', () => {
    async function withSource() {
      const s = await setup();
      const source = await w.t.request({
        method: 'POST',
        url: '/api/v1/settings/sources',
        key: s.account.apiKey,
        body: { name: 'Public form' },
      });
      const post = (body: object, headers: Record<string, string> = {}) =>
        w.t.request({ method: 'POST', url: `/api/v1/in/${source.json().token}`, headers, body });
      const records = async () =>
        (
          await w.t.db
            .selectFrom('records')
            .select((eb) => eb.fn.countAll<string>().as('n'))
            .where('account_id', '=', s.account.id)
            .executeTakeFirstOrThrow()
        ).n;
      return { ...s, post, records };
    }

    it('refuses partner_ids with 422 not_allowed and writes nothing; an API key may still name them', async () => {
      const s = await withSource();
      const before = await s.records();
      const chosen = await s.post({
        entity: 'lead',
        fields: { email: 'chooser@lead.test' },
        distribution: { partner_ids: [s.one.partnerId] },
      });
      expect(chosen.statusCode).toBe(422);
      expect(chosen.json()).toEqual({
        error: 'validation_failed',
        details: [{ key: 'distribution.partner_ids', reason: 'not_allowed', message: expect.any(String) }],
      });
      expect(await s.records()).toBe(before);
      expect(s.one.receiver.received).toHaveLength(0);
      expect(s.two.receiver.received).toHaveLength(0);

      const byKey = await w.t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: s.account.apiKey,
        body: {
          entity: 'lead',
          fields: { email: 'chosen@lead.test' },
          distribution: { partner_ids: [s.one.partnerId] },
        },
      });
      expect(byKey.statusCode).toBe(201);
      expect(byKey.json().distribution).toMatchObject({ partner_names: 'One', partner: [{ name: 'One' }] });
    });

    it('answers only the status and reason of the run, no partner, price or run, replays included', async () => {
      const s = await withSource();
      const sent = {
        entity: 'lead',
        fields: { email: 'anonymous@lead.test' },
        distribution: {},
        meta: { idempotency_key: 'form-once' },
      };
      const answer = await s.post(sent);
      expect(answer.statusCode).toBe(201);
      expect(answer.json().distribution).toEqual({ status: 'distributed', reason: null });
      // Beside the record's own id: a uuid's hex digits can spell a price or a phone number.
      const { id: _id, ...shown } = answer.json();
      for (const secret of ['Two', '@partner.test', '555', 'Berlin', '800', 'run_id']) {
        expect(JSON.stringify(shown)).not.toContain(secret);
      }
      await waitFor(() => s.two.receiver.received.length >= 1);
      const replay = await s.post(sent);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.json()).toEqual(answer.json());

      // No partner can take it: the form learns that much.
      await w.t.db
        .updateTable('participations')
        .set({ paused: true })
        .where('distribution_id', '=', s.distributionId)
        .execute();
      const none = await s.post({ entity: 'lead', fields: { email: 'nobody@lead.test' }, distribution: {} });
      expect(none.statusCode).toBe(201);
      expect(none.json().distribution).toEqual({ status: 'no_match', reason: 'no_active_participation' });
    });
  });

  describe('intake node partner_ids', () => {
    it('refuses an empty list with 422 and writes nothing', async () => {
      const s = await setup();
      for (const url of ['/api/v1/records', '/api/v1/records/bulk']) {
        const entry = {
          entity: 'lead',
          fields: { email: 'empty@lead.test' },
          distribution: { partner_ids: [] },
        };
        const response = await w.t.request({
          method: 'POST',
          url,
          key: s.account.apiKey,
          body: url.endsWith('bulk') ? { records: [entry] } : entry,
        });
        const refusal = url.endsWith('bulk') ? response.json().results[0] : response.json();
        expect(url.endsWith('bulk') ? 200 : response.statusCode, url).toBe(url.endsWith('bulk') ? 200 : 422);
        expect(refusal, url).toMatchObject({
          error: 'validation_failed',
          details: [{ key: 'distribution.partner_ids', reason: 'out_of_range' }],
        });
      }
      const stored = await w.t.db
        .selectFrom('records')
        .select('id')
        .where('account_id', '=', s.account.id)
        .execute();
      expect(stored).toHaveLength(0);
      expect(s.one.receiver.received).toHaveLength(0);
      expect(s.two.receiver.received).toHaveLength(0);
    });
  });

  describe('CRM distribute action', () => {
    it('is refused without the module and distributes through the entry point with it', async () => {
      const crmOnly = await w.account(['crm']);
      const refused = await w.t.request({
        method: 'POST',
        url: '/api/v1/settings/automations',
        key: crmOnly.account.apiKey,
        body: { name: 'Hand over', entity: 'lead', stage: 'Contacted', action: { type: 'distribute' } },
      });
      expect(refused.statusCode).toBe(422);
      expect(refused.json().details[0]).toMatchObject({ key: 'action.type', reason: 'module_not_enabled' });

      const s = await setup(['crm', 'distribution']);
      const configured = await w.t.request({
        method: 'POST',
        url: '/api/v1/settings/automations',
        key: s.account.apiKey,
        body: { name: 'Hand over', entity: 'lead', stage: 'Contacted', action: { type: 'distribute' } },
      });
      expect(configured.statusCode).toBe(201);
      const recordId = await s.record();
      const moved = await w.t.request({
        method: 'POST',
        url: `/api/v1/crm/records/${recordId}/stage`,
        key: s.account.apiKey,
        body: { stage: 'Contacted' },
      });
      expect(moved.statusCode).toBe(200);
      await waitFor(() => s.two.receiver.received.length >= 1, 15_000, 'the delivery of the automation');
      expect(s.two.receiver.received[0]!.json.data.record.id).toBe(recordId);
      const events = (
        await w.t.request({
          method: 'GET',
          url: `/api/v1/records/${recordId}/history`,
          key: s.account.apiKey,
        })
      ).json().events;
      const ran = events.find((e: { type: string }) => e.type === 'automation_ran');
      expect(ran).toMatchObject({ data: { action: 'distribute', status: 'decided' } });
      const distributed = events.find((e: { type: string }) => e.type === 'distributed');
      expect(distributed.actor).toEqual({ type: 'automation', name: 'Hand over' });
      const run = (
        await w.t.request({
          method: 'GET',
          url: `/api/v1/distribution/distributions/${ran.data.run_id}`,
          key: s.account.apiKey,
        })
      ).json();
      expect(run.triggered_by).toBe('automation');
    });
  });

  describe('errors and security', () => {
    it('answers 404 without a distribution or record, and keeps accounts apart', async () => {
      const s = await setup();
      const bare = await w.account();
      const recordOfBare = await bare.record();
      expect((await bare.start(recordOfBare)).json()).toMatchObject({ error: 'no_distribution' });
      expect((await bare.start(recordOfBare)).statusCode).toBe(404);
      await w.t.db
        .updateTable('distributions')
        .set({ enabled: false })
        .where('id', '=', s.distributionId)
        .execute();
      const disabled = await s.start(await s.record());
      expect(disabled.statusCode).toBe(404);
      expect(disabled.json().error).toBe('no_distribution');
      await w.t.db
        .updateTable('distributions')
        .set({ enabled: true })
        .where('id', '=', s.distributionId)
        .execute();
      expect((await s.start(UNKNOWN)).statusCode).toBe(404);

      // Another account's record, run, delivery and participation are not found.
      const recordId = await s.record();
      const answer = (await s.start(recordId)).json();
      const deliveryId = (
        await w.t.request({ method: 'GET', url: '/api/v1/distribution/deliveries', key: s.account.apiKey })
      ).json().deliveries[0].id;
      const key = bare.account.apiKey;
      expect((await bare.start(recordId)).statusCode).toBe(404);
      const theirs = [
        { method: 'GET' as const, url: `/api/v1/distribution/distributions/${answer.run_id}` },
        { method: 'POST' as const, url: `/api/v1/distribution/deliveries/${deliveryId}/return`, body: {} },
        { method: 'POST' as const, url: `/api/v1/distribution/participations/${s.one.participationId}/test` },
      ];
      for (const request of theirs) {
        const response = await w.t.request({ ...request, key });
        expect(response.statusCode, request.url).toBe(404);
      }
      const bareList = await w.t.request({ method: 'GET', url: '/api/v1/distribution/deliveries', key });
      expect(bareList.json().deliveries).toEqual([]);
      expect(s.one.receiver.received).toHaveLength(0);
    });

    it('needs an API key with the distribution permission on an account with the module', async () => {
      const s = await setup();
      const recordId = await s.record();
      const routes = [
        { method: 'POST' as const, url: '/api/v1/distribution/distributions', body: { record_id: recordId } },
        { method: 'GET' as const, url: `/api/v1/distribution/distributions/${UNKNOWN}` },
        { method: 'GET' as const, url: '/api/v1/distribution/deliveries' },
        { method: 'POST' as const, url: `/api/v1/distribution/deliveries/${UNKNOWN}/return`, body: {} },
        { method: 'POST' as const, url: `/api/v1/distribution/participations/${UNKNOWN}/test` },
      ];
      const limited = await w.t.request({
        method: 'POST',
        url: '/api/v1/settings/api-keys',
        key: s.account.apiKey,
        body: { name: 'Records only', permissions: ['records:read', 'records:write'] },
      });
      const source = await w.t.request({
        method: 'POST',
        url: '/api/v1/settings/sources',
        key: s.account.apiKey,
        body: { name: 'Form' },
      });
      const recordToken = await w.t.request({
        method: 'POST',
        url: `/api/v1/records/${recordId}/tokens`,
        key: s.account.apiKey,
        body: { fields: ['first_name'] },
      });
      const without = await w.account([]);
      for (const route of routes) {
        expect((await w.t.request(route)).statusCode, route.url).toBe(401);
        expect((await w.t.request({ ...route, key: 'lk_not_a_key' })).statusCode, route.url).toBe(401);
        const forbidden = await w.t.request({ ...route, key: limited.json().key });
        expect(forbidden.statusCode, route.url).toBe(403);
        expect(forbidden.json().error).toBe('forbidden');
        const notBooked = await w.t.request({ ...route, key: without.account.apiKey });
        expect(notBooked.statusCode, route.url).toBe(403);
        expect(notBooked.json().error).toBe('module_not_enabled');
        expect((await w.t.request({ ...route, key: source.json().token })).statusCode, route.url).toBe(401);
        expect((await w.t.request({ ...route, key: recordToken.json().token })).statusCode, route.url).toBe(
          401,
        );
      }
      expect(s.one.receiver.received).toHaveLength(0);
      expect(s.two.receiver.received).toHaveLength(0);
    });

    it('refuses malformed bodies', async () => {
      const s = await setup();
      const bad = [{}, { record_id: 'nope' }, { record_id: UNKNOWN, extra: 1 }];
      for (const body of bad) {
        const response = await w.t.request({
          method: 'POST',
          url: '/api/v1/distribution/distributions',
          key: s.account.apiKey,
          body,
        });
        expect(response.statusCode, JSON.stringify(body)).toBe(422);
      }
      const node = await w.t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: s.account.apiKey,
        body: { entity: 'lead', fields: { email: 'x@lead.test' }, distribution: { partner_ids: 'all' } },
      });
      expect(node.statusCode).toBe(422);
      // A key the node does not take is a warning (docs/decisions.md, Intake), not a refusal.
      const unknownKey = await w.t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: s.account.apiKey,
        body: { entity: 'lead', fields: { email: 'y@lead.test' }, distribution: { partners: [] } },
      });
      expect(unknownKey.statusCode).toBe(201);
      expect(unknownKey.json().warnings).toContainEqual({ key: 'distribution.partners', reason: 'unmapped' });
    });
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { TIME_ORDERED_UUID } from '../helpers/ids.ts';
import { waitFor } from '../outbound/receiver.ts';
import { type DistributionWorld, startDistributionWorld } from './support.ts';

describe.each(TEST_DATABASES)('deliveries, retries and returns on %s', (kind) => {
  let w: DistributionWorld;
  beforeAll(async () => {
    // Attempts time out after 1.5 s (the hanging receiver's test waits that out), not sooner: on
    // a loaded machine a receiver in this process answered a retry after 300 ms, which then
    // counted as a timeout and a third attempt. Retries follow 100 ms apart.
    w = await startDistributionWorld(kind, { outbound: { webhookTimeoutMs: 1_500 } });
  });
  afterAll(async () => {
    await w?.close();
  });

  /** A one-partner setup over a webhook receiver, with an account webhook for delivery events. */
  async function single(options: { returnDeadlineDays?: number; redistributeOnReturn?: boolean } = {}) {
    const world = await w.account();
    const events = await world.subscribe(['delivery.delivered', 'delivery.failed', 'delivery.returned']);
    const distributionId = await world.factory.distribution('lead', options);
    const partner = await world.webhookPartner(distributionId, { name: 'Receiver' });
    await world.factory.rule(distributionId, { participationIds: [partner.participationId] });
    const delivery = async (runId: string) =>
      (
        await w.t.request({
          method: 'GET',
          url: `/api/v1/distribution/distributions/${runId}`,
          key: world.account.apiKey,
        })
      ).json().deliveries[0];
    return { ...world, distributionId, partner, events, delivery };
  }

  it('retries a receiver that fails, then succeeds: pending first, delivered after the retry', async () => {
    const s = await single();
    s.partner.receiver.answerNext({ status: 500, body: 'down' });
    const answer = (await s.start(await s.record())).json();
    expect(answer).toMatchObject({ status: 'distributed', partner: [{ status: 'pending' }] });
    const done = await waitFor(async () => {
      const d = await s.delivery(answer.run_id);
      return d.status === 'delivered' && d;
    });
    expect(done.attempts).toBe(2);
    // Runs and deliveries have time-ordered ids (docs/decisions.md, Time-ordered ids).
    expect(answer.run_id).toMatch(TIME_ORDERED_UUID);
    expect(done.id).toMatch(TIME_ORDERED_UUID);
    const ids = s.partner.receiver.received.map((r) => r.headers['webhook-id']);
    expect(ids).toHaveLength(2);
    expect(ids[0]).toBe(ids[1]);
    await waitFor(() => s.events.received.length >= 1);
    expect(s.events.received.map((r) => r.json.type)).toEqual(['delivery.delivered']);
  });

  it("lists a delivery's attempts newest first, and only to its own account", async () => {
    const s = await single();
    s.partner.receiver.answerNext({ status: 500, body: 'down for a moment' });
    const answer = (await s.start(await s.record())).json();
    const done = await waitFor(async () => {
      const d = await s.delivery(answer.run_id);
      return d.status === 'delivered' && d;
    });
    const url = `/api/v1/distribution/deliveries/${done.id}/attempts`;
    const read = await w.t.request({ method: 'GET', url, key: s.account.apiKey });
    expect(read.statusCode, read.body).toBe(200);
    const { attempts, next_cursor } = read.json();
    expect(attempts).toMatchObject([
      { attempt: 2, outcome: 'delivered', status_code: 200, error: null, event: 'record.delivered' },
      { attempt: 1, outcome: 'failed', status_code: 500, response: 'down for a moment', error: 'http_500' },
    ]);
    expect(attempts[0].message_id).toBe(attempts[1].message_id);
    expect(next_cursor).toBeNull();
    // Paged like every list.
    const first = (await w.t.request({ method: 'GET', url: `${url}?limit=1`, key: s.account.apiKey })).json();
    expect(first.attempts).toHaveLength(1);
    const second = await w.t.request({
      method: 'GET',
      url: `${url}?limit=1&cursor=${first.next_cursor}`,
      key: s.account.apiKey,
    });
    expect(second.json().attempts.map((a: { attempt: number }) => a.attempt)).toEqual([1]);

    // Errors and security: a stray parameter, an unknown delivery, another account's, no module.
    const stray = await w.t.request({ method: 'GET', url: `${url}?limt=1`, key: s.account.apiKey });
    expect(stray.statusCode).toBe(422);
    const unknown = await w.t.request({
      method: 'GET',
      url: '/api/v1/distribution/deliveries/00000000-0000-4000-8000-000000000000/attempts',
      key: s.account.apiKey,
    });
    expect(unknown.statusCode).toBe(404);
    const other = await w.account();
    expect((await w.t.request({ method: 'GET', url, key: other.account.apiKey })).statusCode).toBe(404);
    const withoutModule = await w.account([]);
    const refused = await w.t.request({ method: 'GET', url, key: withoutModule.account.apiKey });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toBe('module_not_enabled');
  });

  it('answers pending for a receiver that hangs past the timeout, and delivers on the retry', async () => {
    const s = await single();
    s.partner.receiver.answerNext('hang');
    const answer = (await s.start(await s.record())).json();
    expect(answer.partner[0].status).toBe('pending');
    const list = await w.t.request({
      method: 'GET',
      url: '/api/v1/distribution/deliveries?status=pending',
      key: s.account.apiKey,
    });
    expect(list.json().deliveries[0]).toMatchObject({ attempts: 1, error: 'timeout' });
    await waitFor(async () => (await s.delivery(answer.run_id)).status === 'delivered');
  });

  it('fails at once on 410 and pauses the participation', async () => {
    const s = await single();
    s.partner.receiver.answerNext({ status: 410, body: 'gone' });
    const answer = (await s.start(await s.record())).json();
    expect(answer.partner[0].status).toBe('failed');
    expect(await s.delivery(answer.run_id)).toMatchObject({ status: 'failed', attempts: 1 });
    const participation = await w.t.db
      .selectFrom('participations')
      .select(['paused', 'paused_reason'])
      .where('id', '=', s.partner.participationId)
      .executeTakeFirstOrThrow();
    expect(participation).toEqual({ paused: true, paused_reason: 'gone' });
    await waitFor(() => s.events.received.length >= 1);
    expect(s.events.received[0]!.json).toMatchObject({
      type: 'delivery.failed',
      data: { delivery: { status: 'failed', error: 'http_410' } },
    });
    expect((await s.start(await s.record())).json()).toMatchObject({
      status: 'no_match',
      reason: 'no_active_participation',
    });
    expect(s.partner.receiver.received).toHaveLength(1);
  });

  it('honours Retry-After of a 429 and fails once the schedule is used up', async () => {
    const s = await single();
    s.partner.receiver.answerNext({ status: 429, headers: { 'retry-after': '1' } });
    const started = Date.now();
    const answer = (await s.start(await s.record())).json();
    expect(answer.partner[0].status).toBe('pending');
    await waitFor(async () => (await s.delivery(answer.run_id)).status === 'delivered', 10_000);
    const [first, second] = s.partner.receiver.received;
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(950);
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);

    // Three failures: the first attempt and both retries.
    s.partner.receiver.answerAlways({ status: 503 });
    const failing = (await s.start(await s.record())).json();
    const failed = await waitFor(async () => {
      const d = await s.delivery(failing.run_id);
      return d.status === 'failed' && d;
    });
    expect(failed.attempts).toBe(3);
    await waitFor(() => s.events.received.some((r) => r.json.type === 'delivery.failed'));
    s.partner.receiver.answerAlways({ status: 200 });
  });

  it('returns within the deadline, refuses the rest with the reason, and redistributes to another partner', async () => {
    const s = await single({ redistributeOnReturn: true, returnDeadlineDays: 14 });
    const second = await s.webhookPartner(s.distributionId, { name: 'Second' });
    await w.t.db
      .updateTable('distribution_rules')
      .set({ participation_ids: [s.partner.participationId, second.participationId] })
      .where('distribution_id', '=', s.distributionId)
      .execute();
    const reason = await s.factory.returnReason('Not reachable');
    const recordId = await s.record();
    const answer = (await s.start(recordId)).json();
    expect(answer.partner_names).toBe('Receiver');
    const deliveryId = (await s.delivery(answer.run_id)).id;
    // Every key is optional: without one, the request sends no body at all.
    const giveBack = (id: string, body?: object) =>
      w.t.request({
        method: 'POST',
        url: `/api/v1/distribution/deliveries/${id}/return`,
        key: s.account.apiKey,
        body,
      });

    const unknownReason = await giveBack(deliveryId, { reason_id: '00000000-0000-4000-8000-000000000000' });
    expect(unknownReason.statusCode).toBe(422);
    expect(unknownReason.json().details[0]).toMatchObject({ key: 'reason_id' });

    const returned = await giveBack(deliveryId, {
      reason_id: reason,
      text: 'wrong number',
      reported_by: 'Anna',
    });
    expect(returned.statusCode).toBe(200);
    expect(returned.json()).toEqual({ returned: true, redistributed: true });
    await waitFor(() => second.receiver.received.length >= 1);
    expect(s.partner.receiver.received).toHaveLength(1);

    const again = await giveBack(deliveryId);
    expect(again.statusCode).toBe(409);
    expect(again.json()).toEqual({
      error: 'return_not_allowed',
      reason: 'already_returned',
      returned: false,
      redistributed: false,
    });

    // The second partner returns it too: no partner is left that never had it.
    const list = (
      await w.t.request({ method: 'GET', url: '/api/v1/distribution/deliveries', key: s.account.apiKey })
    ).json().deliveries;
    const redelivered = list.find((d: { partner: string }) => d.partner === 'Second');
    await waitFor(async () => {
      const found = (
        await w.t.request({
          method: 'GET',
          url: `/api/v1/distribution/distributions/${redelivered.run_id}`,
          key: s.account.apiKey,
        })
      ).json();
      return found.triggered_by === 'return' && found.deliveries[0].status === 'delivered';
    });
    expect((await giveBack(redelivered.id)).json()).toEqual({ returned: true, redistributed: false });

    const history = (
      await w.t.request({ method: 'GET', url: `/api/v1/records/${recordId}/history`, key: s.account.apiKey })
    ).json().events;
    const returnedEvent = history.find(
      (e: { type: string; data: { reason?: string } }) => e.type === 'delivery_returned' && e.data.reason,
    );
    expect(returnedEvent).toMatchObject({
      message: 'Returned by Receiver (Not reachable)',
      data: { delivery_id: deliveryId, reason: 'Not reachable', text: 'wrong number', reported_by: 'Anna' },
    });
    await waitFor(() => s.events.received.filter((r) => r.json.type === 'delivery.returned').length >= 2);
  });

  it('keeps a record returned without redistribution distributed: a new run ends already_distributed', async () => {
    const s = await single({ redistributeOnReturn: false, returnDeadlineDays: 14 });
    const second = await s.webhookPartner(s.distributionId, { name: 'Other' });
    await w.t.db
      .updateTable('distribution_rules')
      .set({ participation_ids: [s.partner.participationId, second.participationId] })
      .where('distribution_id', '=', s.distributionId)
      .execute();
    const recordId = await s.record();
    const answer = (await s.start(recordId)).json();
    expect(answer).toMatchObject({ status: 'distributed', partner_names: 'Receiver' });
    const deliveryId = (await s.delivery(answer.run_id)).id;
    const returned = await w.t.request({
      method: 'POST',
      url: `/api/v1/distribution/deliveries/${deliveryId}/return`,
      key: s.account.apiKey,
    });
    expect(returned.json()).toEqual({ returned: true, redistributed: false });
    const again = await s.start(recordId);
    expect(again.json()).toMatchObject({ status: 'no_match', reason: 'already_distributed', partner: [] });
    expect(second.receiver.received).toHaveLength(0);
  });

  it('leaves a record whose redistribution found nobody open to a later start, and says so in the history', async () => {
    const s = await single({ redistributeOnReturn: true, returnDeadlineDays: 14 });
    const other = await s.webhookPartner(s.distributionId, { name: 'Other', paused: true });
    await w.t.db
      .updateTable('distribution_rules')
      .set({ participation_ids: [s.partner.participationId, other.participationId] })
      .where('distribution_id', '=', s.distributionId)
      .execute();
    const history = async (recordId: string) =>
      (
        await w.t.request({
          method: 'GET',
          url: `/api/v1/records/${recordId}/history`,
          key: s.account.apiKey,
        })
      ).json().events as { type: string; message: string; data: Record<string, unknown> }[];
    const giveBack = (id: string) =>
      w.t.request({
        method: 'POST',
        url: `/api/v1/distribution/deliveries/${id}/return`,
        key: s.account.apiKey,
      });

    // The only other candidate is paused: the redistribution finds nobody.
    const recordId = await s.record();
    const answer = (await s.start(recordId)).json();
    expect(answer).toMatchObject({ status: 'distributed', partner_names: 'Receiver' });
    const deliveryId = (await s.delivery(answer.run_id)).id;
    expect((await giveBack(deliveryId)).json()).toEqual({ returned: true, redistributed: false });
    const returned = (await history(recordId)).find((e) => e.type === 'delivery_returned')!;
    expect(returned.message).toBe(
      'Returned by Receiver; not redistributed: no other partner could take it now',
    );
    expect(returned.data).toMatchObject({
      delivery_id: deliveryId,
      redistribution: { status: 'no_match', reason: 'no_active_participation', run_id: expect.any(String) },
    });
    // Still nobody; once the other partner is back the record goes to it, and then it is distributed.
    expect((await s.start(recordId)).json()).toMatchObject({
      status: 'no_match',
      reason: 'no_active_participation',
    });
    await w.t.db
      .updateTable('participations')
      .set({ paused: false })
      .where('id', '=', other.participationId)
      .execute();
    expect((await s.start(recordId)).json()).toMatchObject({ status: 'distributed', partner_names: 'Other' });
    expect((await s.start(recordId)).json()).toMatchObject({
      status: 'no_match',
      reason: 'already_distributed',
    });
    expect(s.partner.receiver.received).toHaveLength(1);
    await waitFor(() => other.receiver.received.length >= 1);

    // A distribution switched off at the return: no run, the history says why, and the record
    // may go out once the distribution is on again.
    const later = await s.record();
    const first = (await s.start(later)).json();
    expect(first).toMatchObject({ status: 'distributed', partner_names: 'Receiver' });
    await w.t.db
      .updateTable('distributions')
      .set({ enabled: false })
      .where('id', '=', s.distributionId)
      .execute();
    expect((await giveBack((await s.delivery(first.run_id)).id)).json()).toEqual({
      returned: true,
      redistributed: false,
    });
    expect((await history(later)).find((e) => e.type === 'delivery_returned')).toMatchObject({
      message: 'Returned by Receiver; not redistributed: the distribution is switched off',
      data: { redistribution: { status: 'no_distribution', reason: 'no_distribution', run_id: null } },
    });
    await w.t.db
      .updateTable('distributions')
      .set({ enabled: true })
      .where('id', '=', s.distributionId)
      .execute();
    expect((await s.start(later)).json()).toMatchObject({ status: 'distributed', partner_names: 'Other' });

    // A redistribution that reached a partner adds its run to the return's event; the record is
    // distributed again.
    const third = await s.record();
    const once = (await s.start(third)).json();
    expect(once).toMatchObject({ partner_names: 'Receiver' });
    expect((await giveBack((await s.delivery(once.run_id)).id)).json()).toEqual({
      returned: true,
      redistributed: true,
    });
    const events = await history(third);
    expect(events.find((e) => e.type === 'delivery_returned')).toMatchObject({
      message: 'Returned by Receiver',
      data: { redistribution: { status: 'distributed', reason: null, run_id: expect.any(String) } },
    });
    expect((await s.start(third)).json()).toMatchObject({
      status: 'no_match',
      reason: 'already_distributed',
    });
  });

  it('starts a record whose deliveries all failed again, never to the partner that failed', async () => {
    const s = await single();
    const backup = await s.webhookPartner(s.distributionId, { name: 'Backup' });
    await w.t.db
      .updateTable('distribution_rules')
      .set({ participation_ids: [s.partner.participationId, backup.participationId] })
      .where('distribution_id', '=', s.distributionId)
      .execute();
    // The first partner in the list answers 500 to the first attempt and both retries.
    s.partner.receiver.answerAlways({ status: 500, body: 'down' });
    const recordId = await s.record();
    const first = (await s.start(recordId)).json();
    expect(first).toMatchObject({ status: 'distributed', partner_names: 'Receiver' });
    const failed = await waitFor(async () => {
      const d = await s.delivery(first.run_id);
      return d.status === 'failed' && d;
    }, 10_000);
    expect(failed.attempts).toBe(3);

    const second = (await s.start(recordId)).json();
    expect(second).toMatchObject({ status: 'distributed', partner_names: 'Backup' });
    await waitFor(async () => (await s.delivery(second.run_id)).status === 'delivered');
    expect(backup.receiver.received).toHaveLength(1);
    // Delivered now: the record is distributed.
    expect((await s.start(recordId)).json()).toMatchObject({
      status: 'no_match',
      reason: 'already_distributed',
    });

    // Only the failed partner left: nothing eligible, rather than the same partner again.
    await w.t.db
      .updateTable('participations')
      .set({ paused: true })
      .where('id', '=', backup.participationId)
      .execute();
    const lonely = await s.record();
    const failing = (await s.start(lonely)).json();
    await waitFor(async () => (await s.delivery(failing.run_id)).status === 'failed', 10_000);
    expect((await s.start(lonely)).json()).toMatchObject({
      status: 'no_match',
      reason: 'no_active_participation',
    });
    const deliveries = (
      await w.t.request({ method: 'GET', url: '/api/v1/distribution/deliveries', key: s.account.apiKey })
    ).json().deliveries;
    expect(deliveries.map((d: { partner: string; status: string }) => `${d.partner} ${d.status}`)).toEqual([
      'Receiver failed',
      'Backup delivered',
      'Receiver failed',
    ]);
    s.partner.receiver.answerAlways({ status: 200 });
  });

  it('refuses returns of deliveries that never arrived or are past the deadline', async () => {
    const s = await single({ returnDeadlineDays: 0 });
    const answer = (await s.start(await s.record())).json();
    const delivered = await s.delivery(answer.run_id);
    const giveBack = (id: string) =>
      w.t.request({
        method: 'POST',
        url: `/api/v1/distribution/deliveries/${id}/return`,
        key: s.account.apiKey,
        body: {},
      });
    expect((await giveBack(delivered.id)).json()).toMatchObject({
      reason: 'deadline_passed',
      returned: false,
    });

    await w.t.db
      .updateTable('distributions')
      .set({ return_deadline_days: 14 })
      .where('id', '=', s.distributionId)
      .execute();
    await w.t.db
      .updateTable('deliveries')
      .set({ delivered_at: new Date(Date.now() - 15 * 86_400_000) })
      .where('id', '=', delivered.id)
      .execute();
    const late = await giveBack(delivered.id);
    expect(late.statusCode).toBe(409);
    expect(late.json().reason).toBe('deadline_passed');

    s.partner.receiver.answerAlways({ status: 500 });
    const pending = (await s.start(await s.record({ first_name: 'Pending' }))).json();
    const notYet = await giveBack((await s.delivery(pending.run_id)).id);
    expect(notYet.statusCode).toBe(409);
    expect(notYet.json()).toEqual({
      error: 'return_not_allowed',
      reason: 'not_delivered',
      returned: false,
      redistributed: false,
    });
    s.partner.receiver.answerAlways({ status: 200 });
    expect((await giveBack('00000000-0000-4000-8000-000000000000')).statusCode).toBe(404);
  });

  it('lists deliveries by status, partner and time, newest first, within the limit', async () => {
    const s = await single();
    const other = await s.webhookPartner(s.distributionId, { name: 'Other' });
    await w.t.db
      .updateTable('distribution_rules')
      .set({ participation_ids: [s.partner.participationId, other.participationId], strategy: 'round_robin' })
      .where('distribution_id', '=', s.distributionId)
      .execute();
    for (let i = 0; i < 4; i++) await s.start(await s.record());
    // The partner retires: its deliveries stay listed.
    await w.t.db.updateTable('partners').set({ retired: true }).where('id', '=', other.partnerId).execute();
    const list = async (query: string) => {
      const response = await w.t.request({
        method: 'GET',
        url: `/api/v1/distribution/deliveries${query}`,
        key: s.account.apiKey,
      });
      return { status: response.statusCode, body: response.json() };
    };
    const all = (await list('')).body.deliveries;
    expect(all).toHaveLength(4);
    expect(all[0]).toEqual({
      id: expect.any(String),
      status: 'delivered',
      partner: expect.any(String),
      partner_id: expect.any(String),
      channel: 'webhook',
      rule: 'Rule',
      price_cents: 1000,
      currency: 'EUR',
      attempts: 1,
      error: null,
      created_at: expect.any(String),
      delivered_at: expect.any(String),
      returned_at: null,
      record_id: expect.any(String),
      run_id: expect.any(String),
    });
    const created = all.map((d: { created_at: string }) => d.created_at);
    expect([...created].sort().reverse()).toEqual(created);
    expect((await list(`?partner_id=${other.partnerId}`)).body.deliveries).toHaveLength(2);
    expect(
      (await list(`?partner_id=${other.partnerId}`)).body.deliveries.every(
        (d: { partner: string }) => d.partner === 'Other',
      ),
    ).toBe(true);
    expect((await list('?status=failed')).body.deliveries).toHaveLength(0);
    const oneRecord = all[1].record_id as string;
    expect((await list(`?record_id=${oneRecord}`)).body.deliveries.map((d: { id: string }) => d.id)).toEqual([
      all[1].id,
    ]);
    expect((await list(`?record_id=${crypto.randomUUID()}`)).body.deliveries).toEqual([]);
    expect((await list('?record_id=not-a-uuid')).status).toBe(422);
    expect((await list('?status=delivered&limit=3')).body.deliveries).toHaveLength(3);
    const today = new Date().toISOString().slice(0, 10);
    expect((await list(`?from=${today}&to=${today}`)).body.deliveries).toHaveLength(4);
    expect((await list('?to=2000-01-01')).body.deliveries).toHaveLength(0);
    const oldest = created[created.length - 1];
    expect((await list(`?to=${encodeURIComponent(oldest)}`)).body.deliveries).toHaveLength(1);
    // The same instant with its offset's + sent unescaped (a query string decodes it as a space).
    const oldestInBerlin = new Date(Date.parse(oldest) + 3_600_000).toISOString().replace('Z', '+01:00');
    expect((await list(`?to=${oldestInBerlin}`)).body.deliveries).toHaveLength(1);
    expect(
      (await list(`?from=${encodeURIComponent(created[0])}`)).body.deliveries.length,
    ).toBeGreaterThanOrEqual(1);
    // Pages follow next_cursor with the same filters, without gaps or repeats.
    expect((await list('')).body.next_cursor).toBeNull();
    const first = (await list('?limit=3')).body;
    expect(first.deliveries).toEqual(all.slice(0, 3));
    expect(first.next_cursor).toEqual(expect.any(String));
    const second = (await list(`?limit=3&cursor=${first.next_cursor}`)).body;
    expect(second).toEqual({ deliveries: all.slice(3), next_cursor: null });
    const theirs = (await list(`?partner_id=${other.partnerId}`)).body.deliveries;
    const one = (await list(`?partner_id=${other.partnerId}&limit=1`)).body;
    expect(one.deliveries).toEqual(theirs.slice(0, 1));
    const two = (await list(`?partner_id=${other.partnerId}&limit=1&cursor=${one.next_cursor}`)).body;
    expect(two).toEqual({ deliveries: theirs.slice(1, 2), next_cursor: null });
    const forged = await list(`?cursor=${Buffer.from('["yesterday","x"]').toString('base64url')}`);
    expect(forged.status).toBe(422);
    expect(forged.body.details).toEqual([
      expect.objectContaining({ key: 'cursor', reason: 'invalid_format' }),
    ]);
    expect((await list('?cursor=not%20base64')).status).toBe(422);
    expect((await list('?limit=501')).status).toBe(422);
    expect((await list('?status=lost')).status).toBe(422);
    expect((await list('?from=yesterday')).status).toBe(422);
    // Past the schema's date-time but no storable instant: 422 naming it, not a failed statement.
    for (const [query, key] of [
      ['?from=2027-12-31T23:59:60Z', 'from'],
      ['?to=0000-01-01T00:00:00Z', 'to'],
    ] as const) {
      const refused = await list(query);
      expect([query, refused.status]).toEqual([query, 422]);
      expect(refused.body.details).toEqual([expect.objectContaining({ key, reason: 'invalid_format' })]);
    }
  });

  it('sends a test delivery over webhook and email, and records nothing', async () => {
    const s = await single();
    const mailPartner = await s.factory.partner({ name: 'Mailbox' });
    const mailParticipation = await s.factory.participation(s.distributionId, {
      partnerId: mailPartner,
      channel: 'email',
      address: 'test-delivery@partner.test',
    });
    const test = (id: string) =>
      w.t.request({
        method: 'POST',
        url: `/api/v1/distribution/participations/${id}/test`,
        key: s.account.apiKey,
      });
    const webhook = await test(s.partner.participationId);
    expect(webhook.statusCode).toBe(200);
    expect(webhook.json()).toMatchObject({
      ok: true,
      channel: 'webhook',
      status: 200,
      response: 'ok',
      request: { url: s.partner.receiver.url },
    });
    expect(s.partner.receiver.invalid).toEqual([]);
    const sent = s.partner.receiver.received[0]!.json;
    expect(JSON.parse(webhook.json().request.body)).toEqual(sent);
    expect(sent).toMatchObject({
      type: 'record.delivered',
      data: {
        test: true,
        record: { entity: 'lead', fields: { email: 'erika.mustermann@example.com', interest: 'Solar' } },
      },
    });

    const email = await test(mailParticipation.id);
    expect(email.json()).toMatchObject({
      ok: true,
      channel: 'email',
      status: 250,
      request: { url: 'mailto:test-delivery@partner.test' },
    });
    await waitFor(() => w.smtp.received.some((m) => m.to && JSON.stringify(m.to).includes('test-delivery@')));

    s.partner.receiver.answerNext({ status: 500, body: 'broken' });
    expect((await test(s.partner.participationId)).json()).toMatchObject({
      ok: false,
      status: 500,
      response: 'broken',
      message: expect.stringContaining('http_500'),
    });
    const counts = await w.t.db
      .selectFrom('participation_counts')
      .select('count')
      .where('participation_id', '=', s.partner.participationId)
      .execute();
    expect(counts).toEqual([]);
    expect(
      (
        await w.t.request({ method: 'GET', url: '/api/v1/distribution/deliveries', key: s.account.apiKey })
      ).json().deliveries,
    ).toEqual([]);
    expect((await test('00000000-0000-4000-8000-000000000000')).statusCode).toBe(404);
  });
});

describe.each(TEST_DATABASES)('retiring a partner with deliveries pending on %s', (kind) => {
  let w: DistributionWorld;
  beforeAll(async () => {
    // A failed first attempt waits a minute for its retry: the delivery stays pending.
    w = await startDistributionWorld(kind, { outbound: { retryScheduleMs: [60_000] } });
  });
  afterAll(async () => {
    await w?.close();
  });

  it('ends its pending deliveries failed (partner_retired) and sends no retry; others go on', async () => {
    const world = await w.account();
    const events = await world.subscribe(['delivery.failed']);
    const distributionId = await world.factory.distribution('lead');
    const leaving = await world.webhookPartner(distributionId, { name: 'Leaving' });
    const staying = await world.webhookPartner(distributionId, { name: 'Staying' });
    await world.factory.rule(distributionId, {
      strategy: 'all',
      maxPartners: 2,
      participationIds: [leaving.participationId, staying.participationId],
    });
    const deliveries = async () =>
      (
        await w.t.request({
          method: 'GET',
          url: '/api/v1/distribution/deliveries',
          key: world.account.apiKey,
        })
      ).json().deliveries as { id: string; partner: string; status: string; error: string | null }[];
    const messageOf = async (deliveryId: string) =>
      w.t.db
        .selectFrom('outbound_messages')
        .innerJoin('deliveries', (join) =>
          join
            .onRef('deliveries.account_id', '=', 'outbound_messages.account_id')
            .onRef('deliveries.message_id', '=', 'outbound_messages.id'),
        )
        .select(['outbound_messages.status', 'outbound_messages.last_error'])
        .where('deliveries.id', '=', deliveryId)
        .executeTakeFirstOrThrow();

    // Both receivers fail their first attempt: both deliveries wait for a retry.
    leaving.receiver.answerNext({ status: 503 });
    staying.receiver.answerNext({ status: 503 });
    const recordId = await world.record();
    const answer = (await world.start(recordId)).json();
    expect(answer.partner.map((p: { status: string }) => p.status)).toEqual(['pending', 'pending']);

    const retired = await w.t.request({
      method: 'DELETE',
      url: `/api/v1/distribution/partners/${leaving.partnerId}`,
      key: world.account.apiKey,
    });
    expect(retired.json()).toEqual({ id: leaving.partnerId, retired: true });
    const after = await deliveries();
    const gone = after.find((d) => d.partner === 'Leaving')!;
    const kept = after.find((d) => d.partner === 'Staying')!;
    expect(gone).toMatchObject({ status: 'failed', error: 'partner_retired' });
    expect(kept).toMatchObject({ status: 'pending' });
    expect(await messageOf(gone.id)).toEqual({ status: 'failed', last_error: 'partner_retired' });
    expect((await messageOf(kept.id)).status).toBe('pending');
    await waitFor(() => events.received.length >= 1);
    expect(events.received[0]!.json).toMatchObject({
      type: 'delivery.failed',
      data: { delivery: { id: gone.id, status: 'failed', error: 'partner_retired' } },
    });

    // The retry falls due: it goes to the partner still taking part, never to the retired one.
    await w.t.db
      .updateTable('outbound_messages')
      .set({ next_attempt_at: new Date() })
      .where('account_id', '=', world.account.id)
      .execute();
    await waitFor(() => staying.receiver.received.length >= 2);
    // The receiver counts a request when it arrives; the delivery is `delivered` once the
    // attempt's outcome is written after the answer, which a loaded machine can delay.
    await waitFor(
      async () => (await deliveries()).find((d) => d.partner === 'Staying')?.status === 'delivered',
      10_000,
      'the delivery to the staying partner written as delivered',
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(leaving.receiver.received).toHaveLength(1);
    expect((await deliveries()).map((d) => `${d.partner} ${d.status}`).sort()).toEqual([
      'Leaving failed',
      'Staying delivered',
    ]);

    // PATCH retired:true does the same.
    const other = await world.webhookPartner(distributionId, { name: 'Patched' });
    await w.t.db
      .updateTable('distribution_rules')
      .set({ participation_ids: [other.participationId] })
      .where('distribution_id', '=', distributionId)
      .execute();
    other.receiver.answerNext({ status: 503 });
    const next = (await world.start(await world.record())).json();
    expect(next.partner).toMatchObject([{ name: 'Patched', status: 'pending' }]);
    const patched = await w.t.request({
      method: 'PATCH',
      url: `/api/v1/distribution/partners/${other.partnerId}`,
      key: world.account.apiKey,
      body: { retired: true },
    });
    expect(patched.statusCode).toBe(200);
    expect((await deliveries()).find((d) => d.partner === 'Patched')).toMatchObject({
      status: 'failed',
      error: 'partner_retired',
    });
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { putEntity } from '../helpers/fixtures.ts';
import { startReceiver } from '../outbound/receiver.ts';
import { distributionAccount, expectRefusedCredentials, wrongCredentials } from './support.ts';

const SETUPS = '/api/v1/settings/distributions';
const PARTICIPATIONS = '/api/v1/settings/participations';
const MISSING = '00000000-0000-4000-8000-000000000000';

describe.each(TEST_DATABASES)('distribution setup on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  let partnerId: string;
  let secondPartnerId: string;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await distributionAccount(t);
    partnerId = await partner(account, 'Setup Partner');
    secondPartnerId = await partner(account, 'Second Partner');
    await put('lead', {});
  });
  afterAll(async () => t?.close());

  const call = (
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    url: string,
    body?: unknown,
    key = account.apiKey,
  ) => t.request({ method, url, key, body });
  async function partner(owner: TestAccount, name: string): Promise<string> {
    const response = await call('POST', '/api/v1/distribution/partners', { name }, owner.apiKey);
    if (response.statusCode !== 201) throw new Error(`partner: ${response.body}`);
    return response.json().id;
  }
  const put = (entity: string, body: object, key = account.apiKey) =>
    call('PUT', `${SETUPS}/${entity}`, body, key);
  const webhookBody = (body: object = {}) => ({
    partner_id: partnerId,
    channel: 'webhook',
    address: 'https://partner.example.com/leads',
    price_cents: 1500,
    currency: 'EUR',
    ...body,
  });
  const add = (body: object, entity = 'lead', key = account.apiKey) =>
    call('POST', `${SETUPS}/${entity}/participations`, body, key);
  const addOk = async (body: object) => {
    const response = await add(body);
    if (response.statusCode !== 201)
      throw new Error(`participation: ${response.statusCode} ${response.body}`);
    return response.json();
  };
  const destinationOf = async (participationId: string) =>
    (
      await t.db
        .selectFrom('participations')
        .select('destination_id')
        .where('id', '=', participationId)
        .executeTakeFirstOrThrow()
    ).destination_id;

  describe('happy path', () => {
    it('creates a distribution with defaults, changes only what a PUT names, lists and reads it', async () => {
      const account2 = await distributionAccount(t);
      const created = await put('lead', {}, account2.apiKey);
      expect(created.statusCode).toBe(200);
      expect(created.json()).toMatchObject({
        entity: 'lead',
        return_deadline_days: 14,
        redistribute_on_return: false,
        enabled: true,
        participations: [],
        rules: [],
      });
      const changed = await put(
        'lead',
        { return_deadline_days: 0, redistribute_on_return: true },
        account2.apiKey,
      );
      expect(changed.json()).toMatchObject({
        id: created.json().id,
        return_deadline_days: 0,
        redistribute_on_return: true,
        enabled: true,
      });
      const disabled = await put('lead', { enabled: false }, account2.apiKey);
      expect(disabled.json()).toMatchObject({ return_deadline_days: 0, enabled: false });
      const listed = await call('GET', SETUPS, undefined, account2.apiKey);
      expect(listed.json()).toEqual({ distributions: [disabled.json()], next_cursor: null });
      const read = await call('GET', `${SETUPS}/lead`, undefined, account2.apiKey);
      expect(read.json()).toEqual(disabled.json());
    });

    it('adds a webhook participation with its secret shown once, and an email one without', async () => {
      const created = await add(
        webhookBody({
          caps: { day: 10, month: 200 },
          schedule: { time_zone: 'europe/berlin', weekdays: [5, 1, 1, 2], from: '08:00', to: '18:30' },
          weight: 3,
        }),
      );
      expect(created.statusCode).toBe(201);
      const participation = created.json();
      expect(participation).toMatchObject({
        entity: 'lead',
        partner_id: partnerId,
        partner_name: 'Setup Partner',
        partner_retired: false,
        channel: 'webhook',
        address: 'https://partner.example.com/leads',
        price_cents: 1500,
        currency: 'EUR',
        caps: { day: 10, month: 200 },
        schedule: { time_zone: 'Europe/Berlin', weekdays: [1, 2, 5], from: '08:00', to: '18:30' },
        weight: 3,
        paused: false,
        paused_reason: null,
        previous_secret_until: null,
      });
      expect(participation.secret).toMatch(/^whsec_[A-Za-z0-9+/=]{32}$/);
      const destination = await t.db
        .selectFrom('webhook_destinations')
        .selectAll()
        .where('id', '=', (await destinationOf(participation.id))!)
        .executeTakeFirstOrThrow();
      expect(destination).toMatchObject({
        purpose: 'participation',
        url: 'https://partner.example.com/leads',
      });
      expect(destination.secret).not.toContain(participation.secret);
      // A zone alias is kept as written (the runtime would call it Asia/Calcutta), as calendars keep it.
      const aliased = await call('PATCH', `${PARTICIPATIONS}/${participation.id}`, {
        schedule: { time_zone: 'Asia/Kolkata', weekdays: [1], from: '08:00', to: '18:30' },
      });
      expect(aliased.statusCode, aliased.body).toBe(200);
      expect(aliased.json().schedule.time_zone).toBe('Asia/Kolkata');

      const email = await add({
        partner_id: secondPartnerId,
        channel: 'email',
        address: 'leads@second.example',
        price_cents: 0,
      });
      expect(email.statusCode).toBe(201);
      expect(email.json()).toMatchObject({
        channel: 'email',
        currency: 'EUR',
        caps: { day: null, month: null },
      });
      expect(email.json()).not.toHaveProperty('secret');
      expect(await destinationOf(email.json().id)).toBeNull();

      const setup = await call('GET', `${SETUPS}/lead`);
      const ids = setup.json().participations.map((p: { id: string }) => p.id);
      expect(ids).toEqual(expect.arrayContaining([participation.id, email.json().id]));
      expect(setup.body).not.toContain(participation.secret);
      expect(setup.json().participations[0]).not.toHaveProperty('secret');
      expect((await call('GET', SETUPS)).body).not.toContain(participation.secret);
    });

    it('changes a participation: a new webhook address moves its destination; un-pausing clears the reason', async () => {
      const participation = await addOk(webhookBody());
      const destinationId = (await destinationOf(participation.id))!;
      const patched = await call('PATCH', `${PARTICIPATIONS}/${participation.id}`, {
        address: 'https://moved.example.com/in',
        price_cents: 990,
        currency: 'EUR',
        caps: { month: 5 },
        schedule: { time_zone: 'UTC', weekdays: [1, 2, 3, 4, 5, 6, 7], from: '00:00', to: '24:00' },
        weight: 2,
        paused: true,
      });
      expect(patched.statusCode).toBe(200);
      expect(patched.json()).toMatchObject({
        address: 'https://moved.example.com/in',
        price_cents: 990,
        currency: 'EUR',
        caps: { day: null, month: 5 },
        schedule: { time_zone: 'UTC', to: '24:00' },
        weight: 2,
        paused: true,
        paused_reason: null,
      });
      expect(patched.json()).not.toHaveProperty('secret');
      const destination = await t.db
        .selectFrom('webhook_destinations')
        .select(['url'])
        .where('id', '=', destinationId)
        .executeTakeFirstOrThrow();
      expect(destination.url).toBe('https://moved.example.com/in');

      // The engine pauses a participation whose receiver answered 410 and disables its destination.
      await t.db
        .updateTable('participations')
        .set({ paused_reason: 'gone' })
        .where('id', '=', participation.id)
        .execute();
      await t.db
        .updateTable('webhook_destinations')
        .set({ enabled: false, disabled_reason: 'gone' })
        .where('id', '=', destinationId)
        .execute();
      const resumed = await call('PATCH', `${PARTICIPATIONS}/${participation.id}`, {
        paused: false,
        caps: null,
        schedule: null,
      });
      expect(resumed.json()).toMatchObject({
        paused: false,
        paused_reason: null,
        caps: { day: null, month: null },
        schedule: null,
      });
      const enabled = await t.db
        .selectFrom('webhook_destinations')
        .select(['enabled', 'disabled_reason'])
        .where('id', '=', destinationId)
        .executeTakeFirstOrThrow();
      expect(enabled).toEqual({ enabled: true, disabled_reason: null });
    });

    it('lists distributions oldest first in pages that follow next_cursor', async () => {
      const owner = await distributionAccount(t);
      for (const entity of ['customer', 'deal']) {
        await putEntity(t, owner, entity, {
          name: entity,
          fields: [{ key: 'title', label: 'Title', type: 'text' }],
        });
      }
      const ids: string[] = [];
      for (const entity of ['lead', 'deal', 'customer'])
        ids.push((await put(entity, {}, owner.apiKey)).json().id);
      const page = async (query: string) => {
        const response = await call('GET', `${SETUPS}${query}`, undefined, owner.apiKey);
        expect(response.statusCode, response.body).toBe(200);
        return response.json();
      };
      const all = await page('');
      expect(all.distributions.map((d: { id: string }) => d.id)).toEqual(ids);
      expect(all.next_cursor).toBeNull();
      const first = await page('?limit=2');
      expect(first.distributions).toEqual(all.distributions.slice(0, 2));
      expect(first.next_cursor).toEqual(expect.any(String));
      expect(await page(`?limit=2&cursor=${first.next_cursor}`)).toEqual({
        distributions: all.distributions.slice(2),
        next_cursor: null,
      });
      for (const query of ['?limit=0', '?limit=501', '?cursor=nope', '?limt=2']) {
        const refused = await call('GET', `${SETUPS}${query}`, undefined, owner.apiKey);
        expect(refused.statusCode, query).toBe(422);
      }
    });

    it('keeps one currency per distribution: another answers 422 currency_mismatch', async () => {
      const owner = await distributionAccount(t);
      await put('lead', {}, owner.apiKey);
      const ownPartner = await partner(owner, 'Currency Partner');
      const body = (extra: object = {}) => webhookBody({ partner_id: ownPartner, ...extra });
      const first = await add(body({ currency: 'CHF' }), 'lead', owner.apiKey);
      expect(first.statusCode, first.body).toBe(201);
      const mismatch = (response: { statusCode: number; json(): any }) => {
        expect(response.statusCode).toBe(422);
        expect(response.json()).toMatchObject({
          error: 'validation_failed',
          details: [{ key: 'currency', reason: 'currency_mismatch' }],
        });
      };
      // Another currency, or none (EUR), beside a CHF participation.
      mismatch(await add(body({ currency: 'USD' }), 'lead', owner.apiKey));
      mismatch(await add(body({ currency: undefined }), 'lead', owner.apiKey));
      const second = await add(
        body({ currency: 'CHF', channel: 'email', address: 'b@p.example' }),
        'lead',
        owner.apiKey,
      );
      expect(second.statusCode, second.body).toBe(201);
      // A change to another currency while the other participation stays in CHF, changing nothing.
      const patch = (id: string, changes: object) =>
        call('PATCH', `${PARTICIPATIONS}/${id}`, changes, owner.apiKey);
      mismatch(await patch(second.json().id, { currency: 'EUR', price_cents: 1 }));
      const read = (await call('GET', `${SETUPS}/lead`, undefined, owner.apiKey)).json();
      expect(read.participations.map((p: { currency: string; price_cents: number }) => p.currency)).toEqual([
        'CHF',
        'CHF',
      ]);
      expect(read.participations[1].price_cents).toBe(1500);
      // The same currency again is no change; alone, a participation may take any currency.
      expect((await patch(second.json().id, { currency: 'CHF', price_cents: 2 })).statusCode).toBe(200);
      expect(
        (await call('DELETE', `${PARTICIPATIONS}/${first.json().id}`, undefined, owner.apiKey)).statusCode,
      ).toBe(204);
      const alone = await patch(second.json().id, { currency: 'USD' });
      expect(alone.statusCode, alone.body).toBe(200);
      expect(alone.json().currency).toBe('USD');
      // Another distribution keeps its own currency.
      const otherAccount = await distributionAccount(t);
      await put('lead', {}, otherAccount.apiKey);
      const theirs = await add(
        webhookBody({ partner_id: await partner(otherAccount, 'Euro Partner') }),
        'lead',
        otherAccount.apiKey,
      );
      expect(theirs.statusCode, theirs.body).toBe(201);
    });

    it('switches channels: to email drops the idle destination, back to webhook makes a new secret', async () => {
      const participation = await addOk(webhookBody());
      const destinationId = (await destinationOf(participation.id))!;
      const email = await call('PATCH', `${PARTICIPATIONS}/${participation.id}`, {
        channel: 'email',
        address: 'now@mail.example',
      });
      expect(email.statusCode).toBe(200);
      expect(await destinationOf(participation.id)).toBeNull();
      const gone = await t.db
        .selectFrom('webhook_destinations')
        .select('id')
        .where('id', '=', destinationId)
        .executeTakeFirst();
      expect(gone).toBeUndefined();
      const webhook = await call('PATCH', `${PARTICIPATIONS}/${participation.id}`, {
        channel: 'webhook',
        address: 'https://back.example.com/hook',
      });
      expect(webhook.json().secret).toMatch(/^whsec_/);
      expect(await destinationOf(participation.id)).not.toBeNull();
    });

    it('rotates the secret: shown once, and messages carry both signatures for 24 hours', async () => {
      const receiver = await startReceiver();
      try {
        const participation = await addOk(webhookBody({ address: receiver.url }));
        const destinationId = (await destinationOf(participation.id))!;
        const rotated = await call('PATCH', `${PARTICIPATIONS}/${participation.id}`, { rotate_secret: true });
        expect(rotated.statusCode).toBe(200);
        const secret = rotated.json().secret;
        expect(secret).toMatch(/^whsec_/);
        expect(secret).not.toBe(participation.secret);
        const until = Date.parse(rotated.json().previous_secret_until);
        expect(until - Date.now()).toBeGreaterThan(23.9 * 3600_000);
        expect(until - Date.now()).toBeLessThanOrEqual(24 * 3600_000);
        const read = (await call('GET', `${SETUPS}/lead`)).json();
        const shown = read.participations.find((p: { id: string }) => p.id === participation.id);
        expect(shown.previous_secret_until).toBe(rotated.json().previous_secret_until);
        expect(JSON.stringify(read)).not.toContain(secret);

        // A real message through the outbound engine to the partner's receiver, which checks
        // it with the standardwebhooks package against the new secret and the old one.
        receiver.verifyWith(secret, participation.secret);
        const messageId = await t.services.outbound.enqueueWebhook(t.db, account.id, {
          destinationId,
          type: 'webhook.test',
          data: { participation_id: participation.id },
          maxAttempts: 1,
          sendHere: true,
        });
        const result = await t.services.outbound.sendNow(account.id, messageId);
        expect(result).toMatchObject({ ok: true, statusCode: 200 });
        expect(receiver.invalid).toHaveLength(0);
        expect(receiver.received).toHaveLength(1);
        expect(String(receiver.received[0]!.headers['webhook-signature']).split(' ')).toHaveLength(2);
      } finally {
        await receiver.close();
      }
    });

    it('replaces the ordered rules, keeping a rule’s id while its name stays', async () => {
      const first = await addOk(webhookBody());
      const second = await addOk({ ...webhookBody(), partner_id: secondPartnerId });
      const rules = [
        {
          name: 'Berlin solar',
          filter: [
            { field: 'interest', op: 'equals', value: 'Solar' },
            { field: 'company', op: 'postal_prefix', prefix: '10' },
          ],
          strategy: 'round_robin',
          participation_ids: [first.id, second.id],
        },
        {
          name: 'Big budgets',
          filter: [
            { field: 'budget', op: 'range', min: 10000 },
            { field: 'topics', op: 'in', values: ['Price', 'Funding'] },
          ],
          strategy: 'cheapest',
          max_partners: 2,
          participation_ids: [second.id],
        },
        { name: 'Everything else', strategy: 'all', participation_ids: [first.id] },
      ];
      const put1 = await call('PUT', `${SETUPS}/lead/rules`, rules);
      expect(put1.statusCode).toBe(200);
      const answered = put1.json();
      expect(answered.map((r: { name: string }) => r.name)).toEqual([
        'Berlin solar',
        'Big budgets',
        'Everything else',
      ]);
      expect(answered[0]).toMatchObject({
        position: 0,
        strategy: 'round_robin',
        max_partners: 1,
        participation_ids: [first.id, second.id],
        filter: rules[0]!.filter,
      });
      expect(answered[2]).toMatchObject({ position: 2, filter: [], max_partners: 1 });
      const reordered = await call('PUT', `${SETUPS}/lead/rules`, [
        { ...rules[2], strategy: 'weighted' },
        rules[0],
      ]);
      expect(reordered.json().map((r: { id: string }) => r.id)).toEqual([answered[2].id, answered[0].id]);
      expect(reordered.json()[0]).toMatchObject({ position: 0, strategy: 'weighted' });
      const setup = (await call('GET', `${SETUPS}/lead`)).json();
      expect(setup.rules).toEqual(reordered.json());

      // A participation that rules name is not removed (setup-checks.test.ts); once they no
      // longer name it, it is.
      expect((await call('DELETE', `${PARTICIPATIONS}/${first.id}`)).statusCode).toBe(409);
      expect((await call('PUT', `${SETUPS}/lead/rules`, [])).json()).toEqual([]);
      expect((await call('DELETE', `${PARTICIPATIONS}/${first.id}`)).statusCode).toBe(204);
      const after = (await call('GET', `${SETUPS}/lead`)).json();
      expect(after.participations.map((p: { id: string }) => p.id)).not.toContain(first.id);
    });

    it('keeps the destination of a removed participation while a message to it is pending', async () => {
      const participation = await addOk(webhookBody({ address: 'http://127.0.0.1:9/never' }));
      const destinationId = (await destinationOf(participation.id))!;
      await t.services.outbound.enqueueWebhook(t.db, account.id, {
        destinationId,
        type: 'record.delivered',
        data: {},
        sendHere: true,
      });
      expect((await call('DELETE', `${PARTICIPATIONS}/${participation.id}`)).statusCode).toBe(204);
      const kept = await t.db
        .selectFrom('webhook_destinations')
        .select('id')
        .where('id', '=', destinationId)
        .executeTakeFirst();
      expect(kept).toEqual({ id: destinationId });
      expect(
        (await call('PATCH', `${PARTICIPATIONS}/${participation.id}`, { paused: true })).statusCode,
      ).toBe(404);
    });

    it('drops the destination of a removed participation with its finished messages', async () => {
      const participation = await addOk(webhookBody({ address: 'http://127.0.0.1:9/never' }));
      const destinationId = (await destinationOf(participation.id))!;
      // Written for the engine to send (`sendHere` keeps the dispatcher away for a lease), then
      // finished: nothing is left to send, so the removal takes the destination along.
      const messageId = await t.services.outbound.enqueueWebhook(t.db, account.id, {
        destinationId,
        type: 'record.delivered',
        data: {},
        sendHere: true,
      });
      await t.db
        .updateTable('outbound_messages')
        .set({ status: 'delivered' })
        .where('id', '=', messageId)
        .execute();
      expect((await call('DELETE', `${PARTICIPATIONS}/${participation.id}`)).statusCode).toBe(204);
      const destination = await t.db
        .selectFrom('webhook_destinations')
        .select('id')
        .where('id', '=', destinationId)
        .executeTakeFirst();
      expect(destination).toBeUndefined();
      // Messages have no foreign key to their destination (migration 0020): they go with it.
      const messages = await t.db
        .selectFrom('outbound_messages')
        .select('id')
        .where('account_id', '=', account.id)
        .where('destination_id', '=', destinationId)
        .execute();
      expect(messages).toEqual([]);
    });

    it('loads a setup by entity id for the engine', async () => {
      const entity = await t.services.entities.find(account.id, 'lead');
      const setup = await t.services.distributionSetup.loadSetup(account.id, entity!.id);
      expect(setup?.distribution.entity).toBe('lead');
      expect(setup?.participations.length).toBeGreaterThan(0);
      expect(await t.services.distributionSetup.loadSetup(account.id, MISSING)).toBeUndefined();
      expect((await t.services.partners.find(account.id, partnerId))?.name).toBe('Setup Partner');
    });
  });

  describe('errors', () => {
    it('answers 404 for an unknown entity, and for an entity without a distribution', async () => {
      for (const [method, url, body] of [
        ['GET', `${SETUPS}/nothing`, undefined],
        ['PUT', `${SETUPS}/nothing`, {}],
        ['POST', `${SETUPS}/nothing/participations`, webhookBody()],
        ['PUT', `${SETUPS}/nothing/rules`, []],
      ] as const) {
        const response = await call(method, url, body);
        expect(response.statusCode, `${method} ${url}`).toBe(404);
        expect(response.json().error).toBe('not_found');
      }
      // An entity key not of the form of one names no entity either (not a 422 on the path).
      for (const [method, url, body] of [
        ['GET', `${SETUPS}/NOPE`, undefined],
        ['PUT', `${SETUPS}/9lead`, {}],
        ['POST', `${SETUPS}/le%20ad/participations`, webhookBody()],
        ['PUT', `${SETUPS}/a%00b/rules`, []],
      ] as const) {
        const response = await call(method, url, body);
        expect(response.statusCode, `${method} ${url}`).toBe(404);
        expect(response.json(), `${method} ${url}`).toEqual({ error: 'not_found' });
      }
      const fresh = await distributionAccount(t);
      const freshPartner = await partner(fresh, 'Fresh');
      for (const [method, url, body] of [
        ['GET', `${SETUPS}/lead`, undefined],
        ['POST', `${SETUPS}/lead/participations`, webhookBody({ partner_id: freshPartner })],
        ['PUT', `${SETUPS}/lead/rules`, []],
      ] as const) {
        expect((await call(method, url, body, fresh.apiKey)).statusCode, `${method} ${url}`).toBe(404);
      }
      expect((await call('GET', SETUPS, undefined, fresh.apiKey)).json()).toEqual({
        distributions: [],
        next_cursor: null,
      });
      for (const method of ['PATCH', 'DELETE'] as const) {
        const response = await call(
          method,
          `${PARTICIPATIONS}/${MISSING}`,
          method === 'PATCH' ? {} : undefined,
        );
        expect(response.statusCode, method).toBe(404);
      }
    });

    it('refuses a setup out of bounds with 422', async () => {
      for (const body of [
        { return_deadline_days: -1 },
        { return_deadline_days: 366 },
        { return_deadline_days: 1.5 },
        { enabled: 'yes' },
        { name: 'x' },
      ]) {
        expect((await put('lead', body)).statusCode, JSON.stringify(body)).toBe(422);
      }
    });

    it('refuses participations that break a rule with 422 naming the key', async () => {
      const retired = await partner(account, 'Retired Partner');
      await call('DELETE', `/api/v1/distribution/partners/${retired}`);
      const other = await distributionAccount(t);
      const theirs = await partner(other, 'Their Partner');
      const schedule = { time_zone: 'Europe/Berlin', weekdays: [1], from: '08:00', to: '18:00' };
      const cases: [object, string, string?][] = [
        [webhookBody({ partner_id: MISSING }), 'partner_id', 'unknown_partner'],
        [webhookBody({ partner_id: retired }), 'partner_id', 'unknown_partner'],
        [webhookBody({ partner_id: theirs }), 'partner_id', 'unknown_partner'],
        [webhookBody({ address: 'ftp://partner.example.com/x' }), 'address', 'invalid_format'],
        [webhookBody({ address: 'https://user:pw@partner.example.com/x' }), 'address', 'invalid_format'],
        [webhookBody({ address: 'leads@partner.example' }), 'address', 'invalid_format'],
        [webhookBody({ channel: 'email' }), 'address', 'invalid_format'],
        [webhookBody({ channel: 'sms' }), 'channel'],
        [webhookBody({ price_cents: -1 }), 'price_cents'],
        [webhookBody({ price_cents: 1.5 }), 'price_cents'],
        [webhookBody({ price_cents: '15' }), 'price_cents', 'invalid_type'],
        [webhookBody({ currency: 'eur' }), 'currency'],
        [webhookBody({ currency: 'EURO' }), 'currency'],
        [webhookBody({ caps: { day: 0 } }), 'caps.day'],
        [webhookBody({ caps: { week: 3 } }), 'caps.week'],
        [webhookBody({ weight: 0 }), 'weight'],
        [
          webhookBody({ schedule: { ...schedule, time_zone: 'Mars/Olympus' } }),
          'schedule.time_zone',
          'invalid_time_zone',
        ],
        [
          webhookBody({ schedule: { ...schedule, time_zone: '+01:00' } }),
          'schedule.time_zone',
          'invalid_time_zone',
        ],
        [webhookBody({ schedule: { ...schedule, weekdays: [0] } }), 'schedule.weekdays.0'],
        [webhookBody({ schedule: { ...schedule, weekdays: [8] } }), 'schedule.weekdays.0'],
        [webhookBody({ schedule: { ...schedule, weekdays: [] } }), 'schedule.weekdays'],
        [webhookBody({ schedule: { ...schedule, from: '25:00' } }), 'schedule.from'],
        [webhookBody({ schedule: { ...schedule, to: '8:00' } }), 'schedule.to'],
        [
          webhookBody({ schedule: { ...schedule, from: '08:00', to: '08:00' } }),
          'schedule.to',
          'invalid_range',
        ],
        [webhookBody({ partner_id: undefined }), 'partner_id', 'required'],
        [webhookBody({ secret: 'whsec_mine' }), 'secret'],
      ];
      const before = (await call('GET', `${SETUPS}/lead`)).json().participations.length;
      for (const [body, key, reason] of cases) {
        const response = await add(body);
        const label = JSON.stringify(body);
        expect(response.statusCode, label).toBe(422);
        const detail = response.json().details.find((d: { key: string }) => d.key === key);
        expect(detail, `${label}: ${response.body}`).toBeDefined();
        if (reason) expect(detail.reason, label).toBe(reason);
      }
      expect((await call('GET', `${SETUPS}/lead`)).json().participations).toHaveLength(before);
      // A night window (to before from) is taken: it belongs to the weekday it starts on.
      const night = await add(webhookBody({ schedule: { ...schedule, from: '22:00', to: '06:00' } }));
      expect(night.statusCode, night.body).toBe(201);
      expect(night.json().schedule).toMatchObject({ from: '22:00', to: '06:00' });
    });

    it('refuses a webhook address the outbound policy does not allow', async () => {
      const strict = await startTestApp(kind, { outbound: { allowPrivate: false } });
      try {
        const owner = await distributionAccount(strict);
        const created = await strict.request({
          method: 'POST',
          url: '/api/v1/distribution/partners',
          key: owner.apiKey,
          body: { name: 'Strict' },
        });
        await strict.request({ method: 'PUT', url: `${SETUPS}/lead`, key: owner.apiKey, body: {} });
        for (const address of [
          'http://127.0.0.1:8080/hook',
          'http://localhost/hook',
          'http://169.254.169.254/latest',
          'http://[::1]/hook',
          'http://10.0.0.8/hook',
        ]) {
          const response = await strict.request({
            method: 'POST',
            url: `${SETUPS}/lead/participations`,
            key: owner.apiKey,
            body: webhookBody({ partner_id: created.json().id, address }),
          });
          expect(response.statusCode, address).toBe(422);
          expect(response.json().details[0], address).toMatchObject({
            key: 'address',
            reason: 'blocked_address',
          });
        }
        const allowed = await strict.request({
          method: 'POST',
          url: `${SETUPS}/lead/participations`,
          key: owner.apiKey,
          body: webhookBody({ partner_id: created.json().id, address: 'https://8.8.8.8/hook' }),
        });
        expect(allowed.statusCode).toBe(201);
        const moved = await strict.request({
          method: 'PATCH',
          url: `${PARTICIPATIONS}/${allowed.json().id}`,
          key: owner.apiKey,
          body: { address: 'http://192.168.1.1/' },
        });
        expect(moved.statusCode).toBe(422);
      } finally {
        await strict.close();
      }
    });

    it('refuses participation changes that break a rule, changing nothing', async () => {
      const email = await addOk({
        partner_id: partnerId,
        channel: 'email',
        address: 'a@b.example',
        price_cents: 1,
      });
      const webhook = await addOk(webhookBody());
      const cases: [string, object, string, string?][] = [
        [email.id, { rotate_secret: true }, 'rotate_secret', 'not_allowed'],
        [email.id, { address: 'https://x.example/hook' }, 'address', 'invalid_format'],
        [webhook.id, { channel: 'email' }, 'address', 'invalid_format'],
        [webhook.id, { partner_id: MISSING }, 'partner_id', 'unknown_partner'],
        [webhook.id, { caps: { day: -3 } }, 'caps.day'],
        [
          webhook.id,
          { schedule: { time_zone: 'Nowhere/City', weekdays: [1], from: '01:00', to: '02:00' } },
          'schedule.time_zone',
        ],
        [webhook.id, { rotate_secret: 'yes' }, 'rotate_secret', 'invalid_type'],
      ];
      for (const [id, body, key, reason] of cases) {
        const response = await call('PATCH', `${PARTICIPATIONS}/${id}`, body);
        const label = JSON.stringify(body);
        expect(response.statusCode, label).toBe(422);
        const detail = response.json().details.find((d: { key: string }) => d.key === key);
        expect(detail, `${label}: ${response.body}`).toBeDefined();
        if (reason) expect(detail.reason, label).toBe(reason);
      }
      const setup = (await call('GET', `${SETUPS}/lead`)).json();
      const { secret: _, ...shownWebhook } = webhook;
      expect(setup.participations).toContainEqual(email);
      expect(setup.participations).toContainEqual(shownWebhook);
    });

    it('refuses rules that break a rule with 422 naming the key, keeping the rules there were', async () => {
      const mine = await addOk(webhookBody());
      const other = await distributionAccount(t);
      const theirs = await participationOf(other, 'Rules Partner');
      const base = { name: 'R', strategy: 'all', participation_ids: [mine.id] };
      const kept = (await call('PUT', `${SETUPS}/lead/rules`, [base])).json();
      const cases: [object[], string, string?][] = [
        [[{ ...base, participation_ids: [theirs.id] }], '0.participation_ids', 'unknown_participation'],
        [[{ ...base, participation_ids: [MISSING] }], '0.participation_ids', 'unknown_participation'],
        [[{ ...base, participation_ids: [] }], '0.participation_ids'],
        [[{ ...base, strategy: 'random' }], '0.strategy'],
        [[{ ...base, strategy: 'cickest' }], '0.strategy'],
        [[{ ...base, max_partners: 0 }], '0.max_partners'],
        [[base, { ...base, name: 'r' }], '1.name', 'duplicate'],
        [[{ ...base, name: ' ' }], '0.name', 'required'],
        [
          [{ ...base, filter: [{ field: 'shoe_size', op: 'equals', value: 42 }] }],
          '0.filter.0.field',
          'unknown_field',
        ],
        [[{ ...base, filter: [{ field: 'interest', op: 'equals' }] }], '0.filter.0.value', 'required'],
        [
          [{ ...base, filter: [{ field: 'interest', op: 'in', value: 'Solar' }] }],
          '0.filter.0.value',
          'not_allowed',
        ],
        [[{ ...base, filter: [{ field: 'budget', op: 'range' }] }], '0.filter.0.min', 'required'],
        [
          [{ ...base, filter: [{ field: 'budget', op: 'range', min: 1, prefix: '1' }] }],
          '0.filter.0.prefix',
          'not_allowed',
        ],
        [[{ ...base, filter: [{ field: 'company', op: 'postal_prefix' }] }], '0.filter.0.prefix', 'required'],
        [[{ ...base, filter: [{ field: 'company', op: 'like', value: 'x' }] }], '0.filter.0.op'],
        [[{ ...base, filter: [{ field: 'company', op: 'in', values: [] }] }], '0.filter.0.values'],
        [
          [
            {
              ...base,
              filter: Array.from({ length: 21 }, () => ({ field: 'company', op: 'equals', value: 'x' })),
            },
          ],
          '0.filter',
        ],
        [Array.from({ length: 101 }, (_, i) => ({ ...base, name: `R${i}` })), 'body'],
        [[{ ...base, extra: true }], '0.extra'],
      ];
      for (const [rules, key, reason] of cases) {
        const response = await call('PUT', `${SETUPS}/lead/rules`, rules);
        const label = JSON.stringify(rules).slice(0, 200);
        expect(response.statusCode, label).toBe(422);
        const detail = response.json().details.find((d: { key: string }) => d.key === key);
        expect(detail, `${label}: ${response.body}`).toBeDefined();
        if (reason) expect(detail.reason, label).toBe(reason);
      }
      expect((await call('GET', `${SETUPS}/lead`)).json().rules).toEqual(kept);
      expect((await call('PUT', `${SETUPS}/lead/rules`, { rules: [base] })).statusCode).toBe(422);
    });

    it('checks a filter against the fields as stored, not as a cache still holds them', async () => {
      const owner = await distributionAccount(t);
      const ownPartner = await partner(owner, 'Stored Partner');
      expect((await put('lead', {}, owner.apiKey)).statusCode).toBe(200);
      const participation = (await add(webhookBody({ partner_id: ownPartner }), 'lead', owner.apiKey)).json();
      const rule = (field: string) => [
        {
          name: 'R',
          strategy: 'all',
          participation_ids: [participation.id],
          filter: [{ field, op: 'equals', value: 'x' }],
        },
      ];
      // Loads the definition into the cache.
      expect((await call('PUT', `${SETUPS}/lead/rules`, rule('company'), owner.apiKey)).statusCode).toBe(200);
      // The field goes as another node's PUT would take it away: this node's cache still has it.
      const stored = await t.db
        .selectFrom('entities')
        .select('fields')
        .where('account_id', '=', owner.id)
        .where('key', '=', 'lead')
        .executeTakeFirstOrThrow();
      const fields = (stored.fields as { key: string }[]).filter((field) => field.key !== 'interest');
      await t.db
        .updateTable('entities')
        .set({ fields: JSON.stringify(fields) })
        .where('account_id', '=', owner.id)
        .where('key', '=', 'lead')
        .execute();
      const refused = await call('PUT', `${SETUPS}/lead/rules`, rule('interest'), owner.apiKey);
      expect(refused.statusCode).toBe(422);
      expect(refused.json().details).toEqual([
        { key: '0.filter.0.field', reason: 'unknown_field', message: 'the entity has no field interest' },
      ]);
    });
  });

  describe('security', () => {
    it('needs an API key with the settings permission, on an account with the module', async () => {
      const participation = await addOk(webhookBody());
      const wrong = await wrongCredentials(t, account, 'settings');
      const without = await t.createAccount({ modules: ['crm'] });
      const routes = [
        ['GET', SETUPS, undefined],
        ['GET', `${SETUPS}/lead`, undefined],
        ['PUT', `${SETUPS}/lead`, { enabled: false }],
        ['POST', `${SETUPS}/lead/participations`, webhookBody()],
        ['PATCH', `${PARTICIPATIONS}/${participation.id}`, { rotate_secret: true }],
        ['DELETE', `${PARTICIPATIONS}/${participation.id}`, undefined],
        ['PUT', `${SETUPS}/lead/rules`, []],
      ] as const;
      const before = (await call('GET', `${SETUPS}/lead`)).json();
      await expectRefusedCredentials(t, routes, wrong, without);
      expect((await call('GET', `${SETUPS}/lead`)).json()).toEqual(before);
    });

    it("treats another account's participation and distribution as not found", async () => {
      const other = await distributionAccount(t);
      await putEntityDeal(other);
      await put('deal', {}, other.apiKey);
      const theirs = await participationOf(other, 'Other Partner');
      expect(
        (await call('PATCH', `${PARTICIPATIONS}/${theirs.id}`, { rotate_secret: true })).statusCode,
      ).toBe(404);
      expect((await call('DELETE', `${PARTICIPATIONS}/${theirs.id}`)).statusCode).toBe(404);
      // Their entity `deal` and its distribution do not exist for this account.
      expect((await call('GET', `${SETUPS}/deal`)).statusCode).toBe(404);
      expect((await call('PUT', `${SETUPS}/deal/rules`, [])).statusCode).toBe(404);
      const mine = (await call('GET', `${SETUPS}/lead`)).json();
      expect(mine.participations.map((p: { id: string }) => p.id)).not.toContain(theirs.id);
      const still = (await call('GET', `${SETUPS}/lead`, undefined, other.apiKey)).json();
      expect(still.participations).toEqual([
        expect.objectContaining({ id: theirs.id, previous_secret_until: null }),
      ]);
    });
  });

  /** A partner of `owner` taking part in its lead distribution (set up here). */
  async function participationOf(owner: TestAccount, partnerName: string) {
    await put('lead', {}, owner.apiKey);
    const partnerOfOwner = await partner(owner, partnerName);
    const body = webhookBody({ partner_id: partnerOfOwner });
    return (await call('POST', `${SETUPS}/lead/participations`, body, owner.apiKey)).json();
  }

  async function putEntityDeal(owner: TestAccount) {
    const response = await call(
      'PUT',
      '/api/v1/settings/entities/deal',
      { name: 'Deal', fields: [{ key: 'title', label: 'Title', type: 'text' }] },
      owner.apiKey,
    );
    if (response.statusCode !== 200) throw new Error(`entity: ${response.body}`);
  }
});

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, LEAD_ENTITY } from '../helpers/fixtures.ts';

/** What every body-taking operation is called with: a valid body and values of a wrong JSON type. */
interface BodyCase {
  method: 'POST' | 'PUT' | 'PATCH';
  /** The documented path, as in the OpenAPI document. */
  path: string;
  url: () => string;
  key: () => string;
  body: Record<string, unknown>;
  /** Key of the body (dotted) → a value of another JSON type than the document's. */
  wrong: Record<string, unknown>;
}

function setDotted(body: Record<string, unknown>, dotted: string, value: unknown): Record<string, unknown> {
  const copy = structuredClone(body);
  const parts = dotted.split('.');
  let node: any = copy;
  for (const part of parts.slice(0, -1)) node = node[part];
  node[parts.at(-1)!] = value;
  return copy;
}

describe.each(TEST_DATABASES)('JSON bodies are typed, text is converted, on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  let recordId: string;
  let recordToken: string;
  let sourceToken: string;
  let sourceId: string;
  let keyId: string;
  let webhookId: string;
  let automationId: string;
  let partnerId: string;
  let participationId: string;
  let calendarId: string;
  let userId: string;
  let appointmentId: string;

  /** Every table's rows, so that "nothing written" covers every table there is. */
  /** Every table's rows as text, but those of `leaveOut`. */
  async function snapshot(leaveOut: string[] = []): Promise<string> {
    const tables = await sql<{ name: string }>`
      SELECT table_name AS name FROM information_schema.tables
      WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name`.execute(t.db);
    const parts: string[] = [];
    for (const { name } of tables.rows) {
      if (leaveOut.includes(name)) continue;
      const rows = await sql<{ row: string }>`SELECT t::text AS row FROM ${sql.table(name)} t`.execute(t.db);
      parts.push(
        `${name}:${rows.rows
          .map((r) => r.row)
          .sort()
          .join('\n')}`,
      );
    }
    return parts.join('\n\n');
  }

  async function refusalsLogged(): Promise<number> {
    const result = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM intake_log WHERE outcome = 'refused'`.execute(t.db);
    return result.rows[0]!.n;
  }

  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t, { modules: ['crm', 'distribution', 'booking'] });
    const allDay = [['00:00', '24:00']];
    calendarId = (
      await t.request({
        method: 'POST',
        url: '/api/v1/settings/booking/calendars',
        key: account.apiKey,
        body: {
          name: 'Typed',
          time_zone: 'UTC',
          min_notice_minutes: 0,
          weekly: {
            mon: allDay,
            tue: allDay,
            wed: allDay,
            thu: allDay,
            fri: allDay,
            sat: allDay,
            sun: allDay,
          },
        },
      })
    ).json().id;
    const slot = new Date(Math.ceil((Date.now() + 86_400_000) / 1_800_000) * 1_800_000).toISOString();
    appointmentId = (
      await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: { entity: 'lead', fields: { email: 'booked@b.co' }, booking: { starts_at: slot } },
      })
    ).json().booking.appointment_id;
    const created = await t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: account.apiKey,
      body: { entity: 'lead', fields: { email: 'typed@b.co' } },
    });
    recordId = created.json().id;
    recordToken = (
      await t.request({
        method: 'POST',
        url: `/api/v1/records/${recordId}/tokens`,
        key: account.apiKey,
        body: { fields: ['first_name', 'budget'] },
      })
    ).json().token;
    const source = (
      await t.request({
        method: 'POST',
        url: '/api/v1/settings/sources',
        key: account.apiKey,
        body: { name: 'Typed form' },
      })
    ).json();
    sourceToken = source.token;
    sourceId = source.id;
    webhookId = (
      await t.request({
        method: 'POST',
        url: '/api/v1/settings/webhooks',
        key: account.apiKey,
        body: { url: 'http://127.0.0.1:9/typed', events: ['*'] },
      })
    ).json().id;
    userId = (
      await t.request({
        method: 'POST',
        url: '/api/v1/settings/users',
        key: account.apiKey,
        body: { email: 'typed@b.co', name: 'Typed' },
      })
    ).json().id;
    keyId = (await t.request({ method: 'GET', url: '/api/v1/settings/api-keys', key: account.apiKey })).json()
      .api_keys[0].id;
    automationId = (
      await t.request({
        method: 'POST',
        url: '/api/v1/settings/automations',
        key: account.apiKey,
        body: { name: 'Typed', entity: 'lead', stage: 'Won', action: { type: 'note', body: 'won' } },
      })
    ).json().id;
    partnerId = (
      await t.request({
        method: 'POST',
        url: '/api/v1/distribution/partners',
        key: account.apiKey,
        body: { name: 'Typed partner' },
      })
    ).json().id;
    await t.request({
      method: 'PUT',
      url: '/api/v1/settings/distributions/lead',
      key: account.apiKey,
      body: {},
    });
    participationId = (
      await t.request({
        method: 'POST',
        url: '/api/v1/settings/distributions/lead/participations',
        key: account.apiKey,
        body: { partner_id: partnerId, channel: 'email', address: 'p@b.co', price_cents: 100 },
      })
    ).json().id;
  });
  afterAll(async () => t?.close());

  const apiKey = () => account.apiKey;
  const cases: BodyCase[] = [
    {
      method: 'POST',
      path: '/admin/v1/accounts',
      url: () => '/admin/v1/accounts',
      key: () => ADMIN_TOKEN,
      body: { name: 'Typed', modules: ['crm'], rate_limit_per_minute: 77 },
      wrong: { name: false, rate_limit_per_minute: '77', modules: 'crm', 'modules.0': 1 },
    },
    {
      method: 'PATCH',
      path: '/admin/v1/accounts/{id}',
      url: () => `/admin/v1/accounts/${account.id}`,
      key: () => ADMIN_TOKEN,
      body: { name: 'Typed', rate_limit_per_minute: 1000 },
      wrong: { name: ['x'], rate_limit_per_minute: '1000', modules: null },
    },
    {
      method: 'POST',
      path: '/admin/v1/accounts/{id}/api-keys',
      url: () => `/admin/v1/accounts/${account.id}/api-keys`,
      key: () => ADMIN_TOKEN,
      body: { name: 'Operator typed', strict: false, permissions: ['records:read'] },
      wrong: { name: 1, strict: 'false', permissions: 'records:read' },
    },
    {
      method: 'POST',
      path: '/api/v1/settings/api-keys',
      url: () => '/api/v1/settings/api-keys',
      key: apiKey,
      body: { name: 'k', strict: false, permissions: ['records:read'] },
      wrong: { name: 1, strict: null, permissions: 'records:read' },
    },
    {
      method: 'PATCH',
      path: '/api/v1/settings/api-keys/{id}',
      url: () => `/api/v1/settings/api-keys/${keyId}`,
      key: apiKey,
      body: { name: 'main' },
      wrong: { name: false, strict: 'true' },
    },
    {
      method: 'POST',
      path: '/api/v1/settings/sources',
      url: () => '/api/v1/settings/sources',
      key: apiKey,
      body: { name: 'Fair', rate_limit_per_minute: 30, allowed_origins: ['https://a.example'] },
      wrong: {
        name: false,
        rate_limit_per_minute: '30',
        allowed_origins: 'https://a.example',
        success_url: 1,
      },
    },
    {
      method: 'PATCH',
      path: '/api/v1/settings/sources/{id}',
      url: () => `/api/v1/settings/sources/${sourceId}`,
      key: apiKey,
      body: { honeypot_field: 'website', success_url: null, allowed_origins: ['http://127.0.0.1:8080'] },
      wrong: { honeypot_field: 1, rate_limit_per_minute: true, 'allowed_origins.0': 5, error_url: false },
    },
    {
      method: 'POST',
      path: '/api/v1/settings/users',
      url: () => '/api/v1/settings/users',
      key: apiKey,
      body: { email: 'u@b.co', name: 'U', role: 'viewer' },
      wrong: { name: 7, email: ['u@b.co'], role: 1 },
    },
    {
      method: 'PATCH',
      path: '/api/v1/settings/users/{id}',
      url: () => `/api/v1/settings/users/${userId}`,
      key: apiKey,
      body: { name: 'Renamed', role: 'admin' },
      wrong: { name: 7, role: ['admin'] },
    },
    {
      method: 'POST',
      path: '/api/v1/session',
      url: () => '/api/v1/session',
      key: () => '',
      body: { email: 'typed@b.co', password: 'a long password' },
      wrong: { email: 1, password: true, token: 5, account_id: 7 },
    },
    {
      method: 'POST',
      path: '/api/v1/session/link',
      url: () => '/api/v1/session/link',
      key: () => '',
      body: { email: 'typed@b.co' },
      wrong: { email: ['typed@b.co'] },
    },
    {
      method: 'POST',
      path: '/api/v1/session/password',
      url: () => '/api/v1/session/password',
      key: () => '',
      body: { token: 'sl_unknown', password: 'a long password' },
      wrong: { token: 1, password: 1234567890, current_password: false },
    },
    {
      method: 'PUT',
      path: '/api/v1/settings/entities/{key}',
      url: () => '/api/v1/settings/entities/lead',
      key: apiKey,
      body: { ...LEAD_ENTITY, duplicate_rule: null },
      wrong: {
        name: false,
        duplicate_rule: false,
        'fields.0.required': 'true',
        'fields.0.label': 1,
        archived: 0,
        pipelines: {},
      },
    },
    {
      method: 'POST',
      path: '/api/v1/records',
      url: () => '/api/v1/records',
      key: apiKey,
      body: { entity: 'lead', fields: { email: 'new@b.co' }, meta: { source: 'web' } },
      wrong: {
        entity: 5,
        fields: 'email=x',
        note: 1,
        documents: {},
        'meta.source': 1,
        'meta.external_id': 42,
        meta: 'x',
      },
    },
    {
      method: 'POST',
      path: '/api/v1/in/{token}',
      url: () => `/api/v1/in/${sourceToken}`,
      key: () => '',
      body: { entity: 'lead', fields: { email: 'in@b.co' } },
      wrong: { entity: true, note: ['x'] },
    },
    {
      method: 'POST',
      path: '/api/v1/records/bulk',
      url: () => '/api/v1/records/bulk',
      key: apiKey,
      body: { records: [{ entity: 'lead', fields: { email: 'bulk@b.co' } }] },
      // An entry of a wrong type is that entry's refusal (intake-bulk-s1.test.ts), not the call's.
      wrong: { records: { entity: 'lead' } },
    },
    {
      method: 'PATCH',
      path: '/api/v1/records/{id}',
      url: () => `/api/v1/records/${recordId}`,
      key: apiKey,
      body: { fields: { first_name: 'Ann' } },
      wrong: { fields: 'first_name', documents: 'https://x.test/a.pdf' },
    },
    {
      method: 'PATCH',
      path: '/api/v1/records',
      url: () => '/api/v1/records',
      key: () => recordToken,
      body: { fields: { first_name: 'Ann' } },
      wrong: { fields: ['first_name'] },
    },
    {
      method: 'POST',
      path: '/api/v1/records/{id}/tokens',
      url: () => `/api/v1/records/${recordId}/tokens`,
      key: apiKey,
      body: { fields: ['first_name'], expires_in_days: 3 },
      wrong: { expires_in_days: '3', fields: 'first_name' },
    },
    {
      method: 'POST',
      path: '/api/v1/notes',
      url: () => '/api/v1/notes',
      key: apiKey,
      body: { body: 'Called', record: 'placeholder' },
      wrong: { body: 1, kind: 5, email: ['a@b.co'] },
    },
    {
      method: 'POST',
      path: '/api/intake',
      url: () => '/api/intake',
      key: apiKey,
      body: { entity: 'lead', email: 's1@b.co' },
      wrong: { entity: 5, note: false },
    },
    {
      method: 'POST',
      path: '/api/leads/bulk',
      url: () => '/api/leads/bulk',
      key: apiKey,
      body: { entity: 'lead', batch: [{ email: 'b1@b.co' }] },
      wrong: { entity: false, batch: { email: 'x' }, source: 1 },
    },
    {
      method: 'POST',
      path: '/api/v1/settings/automations',
      url: () => '/api/v1/settings/automations',
      key: apiKey,
      body: { name: 'n', entity: 'lead', stage: 'Won', action: { type: 'note', body: 'x' } },
      wrong: { name: 1, enabled: 'yes', action: 'note', 'action.type': 5, 'action.record_token_days': '3' },
    },
    {
      method: 'PATCH',
      path: '/api/v1/settings/automations/{id}',
      url: () => `/api/v1/settings/automations/${automationId}`,
      key: apiKey,
      body: { enabled: true },
      wrong: { enabled: 'no', action: [], stage: 4 },
    },
    {
      method: 'POST',
      path: '/api/v1/crm/records/{id}/stage',
      url: () => `/api/v1/crm/records/${recordId}/stage`,
      key: apiKey,
      body: { stage: 'Contacted' },
      wrong: { stage: 1, pipeline: false },
    },
    {
      method: 'POST',
      path: '/api/v1/distribution/distributions',
      url: () => '/api/v1/distribution/distributions',
      key: apiKey,
      body: { record_id: '00000000-0000-4000-8000-000000000000' },
      wrong: { record_id: 7 },
    },
    {
      method: 'POST',
      path: '/api/v1/distribution/deliveries/{id}/return',
      url: () => '/api/v1/distribution/deliveries/00000000-0000-4000-8000-000000000000/return',
      key: apiKey,
      body: { text: 'Wrong number', reported_by: 'Anna' },
      wrong: { reason_id: 1, text: 2, reported_by: ['Anna'] },
    },
    {
      method: 'PATCH',
      path: '/api/leads/{id}/status',
      url: () => `/api/leads/${recordId}/status`,
      key: apiKey,
      body: { status_step: 'Won' },
      wrong: { status_step: ['Won'], pipeline: 3 },
    },
    {
      method: 'PATCH',
      path: '/api/leads/{id}',
      url: () => `/api/leads/${recordId}`,
      key: apiKey,
      body: { fields: { first_name: 'Ann' } },
      wrong: { fields: 'x', note: 3 },
    },
    {
      method: 'POST',
      path: '/api/v1/settings/webhooks',
      url: () => '/api/v1/settings/webhooks',
      key: apiKey,
      body: { url: 'http://127.0.0.1:9/typed', events: ['record.created'], description: 'Typed' },
      wrong: { url: 1, events: 'record.created', 'events.0': true, description: 2 },
    },
    {
      method: 'PATCH',
      path: '/api/v1/settings/webhooks/{id}',
      url: () => `/api/v1/settings/webhooks/${webhookId}`,
      key: apiKey,
      body: { description: null, enabled: true, rotate_secret: false },
      wrong: { enabled: 'true', rotate_secret: 1, url: ['x'], events: {}, description: 0 },
    },
    {
      method: 'POST',
      path: '/api/v1/settings/webhooks/{id}/recover',
      url: () => `/api/v1/settings/webhooks/${webhookId}/recover`,
      key: apiKey,
      body: { since: '2026-01-01T00:00:00Z', until: '2026-01-02T00:00:00Z' },
      wrong: { since: 20260101, until: true },
    },
    {
      method: 'POST',
      path: '/api/v1/distribution/partners',
      url: () => '/api/v1/distribution/partners',
      key: apiKey,
      body: { name: 'Typed GmbH', country: 'DE', billing_address_differs: false },
      wrong: {
        name: 1,
        country: ['DE'],
        billing_address_differs: 'false',
        billingName: 2,
        wantsEInvoice: 'yes',
      },
    },
    {
      method: 'PATCH',
      path: '/api/v1/distribution/partners/{id}',
      url: () => `/api/v1/distribution/partners/${partnerId}`,
      key: apiKey,
      body: { city: 'Berlin', billing_city: null },
      wrong: { city: 1, billing_city: false, retired: 'false', vatId: ['x'] },
    },
    {
      method: 'PUT',
      path: '/api/v1/settings/distributions/{entity_key}',
      url: () => '/api/v1/settings/distributions/lead',
      key: apiKey,
      body: { return_deadline_days: 14, redistribute_on_return: false, enabled: true },
      wrong: { return_deadline_days: '14', redistribute_on_return: 0, enabled: null },
    },
    {
      method: 'POST',
      path: '/api/v1/settings/distributions/{entity_key}/participations',
      url: () => '/api/v1/settings/distributions/lead/participations',
      key: apiKey,
      body: {
        partner_id: 'placeholder',
        channel: 'email',
        address: 'q@b.co',
        price_cents: 100,
        caps: { day: 5 },
        schedule: { time_zone: 'UTC', weekdays: [1], from: '08:00', to: '17:00' },
      },
      wrong: {
        price_cents: '100',
        channel: 1,
        caps: [5],
        'caps.day': '5',
        'schedule.weekdays': 1,
        'schedule.weekdays.0': '1',
        paused: 'no',
      },
    },
    {
      method: 'PATCH',
      path: '/api/v1/settings/participations/{id}',
      url: () => `/api/v1/settings/participations/${participationId}`,
      key: apiKey,
      body: { price_cents: 200, paused: false },
      wrong: { price_cents: '200', paused: 0, rotate_secret: 'true', caps: 5, schedule: 'always' },
    },
    {
      method: 'PUT',
      path: '/api/v1/settings/distributions/{entity_key}/rules',
      url: () => '/api/v1/settings/distributions/lead/rules',
      key: apiKey,
      body: [{ name: 'All', strategy: 'all', participation_ids: ['placeholder'] }] as unknown as Record<
        string,
        unknown
      >,
      wrong: { '0.name': 1, '0.max_partners': '1', '0.participation_ids': 'x', '0.filter': {} },
    },
    {
      method: 'POST',
      path: '/api/v1/settings/return-reasons',
      url: () => '/api/v1/settings/return-reasons',
      key: apiKey,
      body: { name: 'Wrong number' },
      wrong: { name: ['x'] },
    },
  ];

  cases.push(
    {
      method: 'POST',
      path: '/api/v1/settings/booking/calendars',
      url: () => '/api/v1/settings/booking/calendars',
      key: apiKey,
      body: { name: 'Typed', time_zone: 'UTC', weekly: { mon: [['09:00', '10:00']] }, capacity: 2 },
      wrong: {
        name: 1,
        time_zone: false,
        weekly: [],
        'weekly.mon': 'all day',
        capacity: '2',
        default: 'yes',
      },
    },
    {
      method: 'PATCH',
      path: '/api/v1/settings/booking/calendars/{id}',
      url: () => `/api/v1/settings/booking/calendars/${calendarId}`,
      key: apiKey,
      body: { slot_minutes: 30, exceptions: [{ date: '2030-01-01', hours: [] }] },
      wrong: { slot_minutes: '30', exceptions: {}, 'exceptions.0.hours': 'closed', default: 1 },
    },
    {
      method: 'POST',
      path: '/api/v1/booking/book',
      url: () => '/api/v1/booking/book',
      key: () => '',
      body: { token: 'bk_placeholder', starts_at: '2030-01-01T00:00:00Z' },
      wrong: { token: 5, starts_at: 1_893_456_000 },
    },
    {
      method: 'POST',
      path: '/api/v1/booking/appointments/{id}/cancel',
      url: () => `/api/v1/booking/appointments/${appointmentId}/cancel`,
      key: apiKey,
      body: { reason: 'typed' },
      wrong: { reason: 3 },
    },
  );

  const send = (c: BodyCase, body: unknown) =>
    t.request({ method: c.method, url: c.url(), key: c.key() || undefined, body });

  describe('happy path', () => {
    it('covers every operation of the document that takes a body', () => {
      const doc = t.app.swagger() as { paths: Record<string, Record<string, { requestBody?: unknown }>> };
      const withBody = Object.entries(doc.paths).flatMap(([path, methods]) =>
        Object.entries(methods)
          .filter(([, operation]) => operation.requestBody)
          .map(([method]) => `${method.toUpperCase()} ${path}`),
      );
      expect(cases.map((c) => `${c.method} ${c.path}`).sort()).toEqual(withBody.sort());
    });

    it('takes text of a form body and of a query string as numbers and booleans', async () => {
      const form = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'entity=lead&email=form%40b.co&budget=42&consent=true',
      });
      expect(form.statusCode).toBe(200);
      const lead = await t.request({
        method: 'GET',
        url: `/api/v1/records/${form.json().lead_id}`,
        key: account.apiKey,
      });
      expect(lead.json().fields).toMatchObject({ email: 'form@b.co', budget: 42, consent: true });

      const limited = await t.request({ method: 'GET', url: '/api/v1/records?limit=1', key: account.apiKey });
      expect(limited.statusCode).toBe(200);
      expect(limited.json().records).toHaveLength(1);
    });

    it('converts form text on the source-token door too', async () => {
      const form = await t.request({
        method: 'POST',
        url: `/api/v1/in/${sourceToken}`,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'entity=lead&email=door%40b.co&rooms=3',
      });
      expect(form.statusCode).toBe(201);
      const record = await t.request({
        method: 'GET',
        url: `/api/v1/records/${form.json().id}`,
        key: account.apiKey,
      });
      expect(record.json().fields).toMatchObject({ email: 'door@b.co', rooms: 3 });
    });

    it('still coerces record field values by the service rule (decisions §3)', async () => {
      const created = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: { entity: 'lead', fields: { email: 'coerce@b.co', budget: '42', consent: 'yes', rooms: '3' } },
      });
      expect(created.statusCode).toBe(201);
      const record = await t.request({
        method: 'GET',
        url: `/api/v1/records/${created.json().id}`,
        key: account.apiKey,
      });
      expect(record.json().fields).toMatchObject({ budget: 42, consent: true, rooms: 3 });
      const patched = await t.request({
        method: 'PATCH',
        url: `/api/v1/records/${created.json().id}`,
        key: account.apiKey,
        body: { fields: { budget: '7.5' } },
      });
      expect(patched.statusCode).toBe(200);
      const again = await t.request({
        method: 'GET',
        url: `/api/v1/records/${created.json().id}`,
        key: account.apiKey,
      });
      expect(again.json().fields.budget).toBe(7.5);
    });
  });

  describe('errors', () => {
    it('refuses each value of a wrong JSON type with 422 invalid_type and writes nothing', async () => {
      for (const c of cases) {
        if (c.path === '/api/v1/notes') c.body.record = recordId;
        if (c.path.endsWith('/participations')) c.body.partner_id = partnerId;
        if (c.path.endsWith('/rules'))
          (c.body as unknown as { participation_ids: string[] }[])[0]!.participation_ids = [participationId];
        // An intake call's refusal is logged (decisions §10): it writes its log entry and nothing else.
        const intakeDoor =
          c.method === 'POST' &&
          [
            '/api/v1/records',
            '/api/v1/in/{token}',
            '/api/v1/records/bulk',
            '/api/intake',
            '/api/leads/bulk',
          ].includes(c.path);
        const leaveOut = intakeDoor ? ['intake_log'] : [];
        for (const [dotted, value] of Object.entries(c.wrong)) {
          const before = await snapshot(leaveOut);
          const logged = await refusalsLogged();
          const response = await send(c, setDotted(c.body, dotted, value));
          const label = `${c.method} ${c.path} ${dotted}=${JSON.stringify(value)}`;
          expect(response.statusCode, `${label}: ${response.body}`).toBe(422);
          if (c.path.startsWith('/api/v1') || c.path.startsWith('/admin')) {
            expect(response.json().error, label).toBe('validation_failed');
            expect(response.json().details, label).toContainEqual(
              expect.objectContaining({ key: dotted, reason: 'invalid_type' }),
            );
          } else {
            expect(response.json().status, label).toBe('error');
            expect(Object.keys(response.json().errors), label).toContain(dotted);
          }
          expect(await snapshot(leaveOut), label).toBe(before);
          expect(await refusalsLogged(), label).toBe(logged + (intakeDoor ? 1 : 0));
        }
      }
    });

    it('answers the examples of the issue exactly', async () => {
      const sources = await t.request({
        method: 'POST',
        url: '/api/v1/settings/sources',
        key: account.apiKey,
        body: { name: ['x'] },
      });
      expect(sources.statusCode).toBe(422);
      expect(sources.json().details).toEqual([
        expect.objectContaining({ key: 'name', reason: 'invalid_type' }),
      ]);
      const entity = await t.request({
        method: 'PUT',
        url: '/api/v1/settings/entities/e2',
        key: account.apiKey,
        body: { name: 'E', fields: [], duplicate_rule: false },
      });
      expect(entity.statusCode).toBe(422);
      expect(entity.json().details).toEqual([
        expect.objectContaining({ key: 'duplicate_rule', reason: 'invalid_type' }),
      ]);
    });

    it('refuses a form body where the document lists only JSON, writing nothing', async () => {
      const before = await t.request({
        method: 'GET',
        url: '/api/v1/settings/api-keys',
        key: account.apiKey,
      });
      const response = await t.request({
        method: 'POST',
        url: '/api/v1/settings/api-keys',
        key: account.apiKey,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'name=k&strict=true',
      });
      expect(response.statusCode).toBe(415);
      expect(response.json()).toEqual({ error: 'unsupported_media_type' });
      const after = await t.request({ method: 'GET', url: '/api/v1/settings/api-keys', key: account.apiKey });
      expect(after.json()).toEqual(before.json());
      const form = (method: 'POST' | 'PATCH', url: string) =>
        t.request({
          method,
          url,
          key: account.apiKey,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: 'first_name=Ann',
        });
      const s1 = await form('PATCH', `/api/leads/${recordId}`);
      expect(s1.statusCode).toBe(415);
      expect(s1.json()).toMatchObject({ status: 'error' });
      // An address without a route stays 404, whatever its body.
      expect((await form('POST', '/api/v1/nowhere')).statusCode).toBe(404);
    });
  });

  describe('security', () => {
    it('checks the credential before the body: a wrong type without a key is 401', async () => {
      const response = await t.request({
        method: 'POST',
        url: '/api/v1/settings/sources',
        body: { name: false },
      });
      expect(response.statusCode).toBe(401);
    });

    it('takes a JSON `__proto__` key as data, not as a type to convert', async () => {
      const response = await t.request({
        method: 'POST',
        url: '/api/v1/settings/sources',
        key: account.apiKey,
        payload: '{"name":"Proto","__proto__":{"name":1}}',
        headers: { 'content-type': 'application/json' },
      });
      expect(response.statusCode).toBe(422);
    });
  });
});

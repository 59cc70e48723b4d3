import type { CommandSpec, Connection, Row } from './http-commands.ts';

/** What the distribution commands use of the HTTP client (http-commands.ts hands it in). */
export interface ClientTools {
  call(
    connection: Connection,
    credential: 'key',
    method: string,
    path: string,
    body?: unknown,
  ): Promise<unknown>;
  /** Every item of a cursor list, its pages followed through `next_cursor`. */
  listAll(connection: Connection, credential: 'key', path: string, field: string): Promise<Row[]>;
  table(rows: Row[], columns: string[]): string;
  required(value: string | boolean | undefined, name: string): string;
  wholeNumber(value: string, name: string): number;
  usageError(message: string): Error;
}

type Values = Record<string, string | boolean | undefined>;

const PARTNERS = '/api/v1/distribution/partners';
const SETUPS = '/api/v1/settings/distributions';

/** Text options of a partner and the body key each sets. */
const PARTNER_TEXT_OPTIONS: Record<string, string> = {
  name: 'name',
  'contact-person': 'contact_person',
  email: 'email',
  phone: 'phone',
  street: 'street',
  'postal-code': 'postal_code',
  city: 'city',
  country: 'country',
  'vat-id': 'vat_id',
  'buyer-reference': 'buyer_reference',
  'billing-name': 'billing_name',
  'billing-street': 'billing_street',
  'billing-postal-code': 'billing_postal_code',
  'billing-city': 'billing_city',
  'billing-country': 'billing_country',
  'billing-email': 'billing_email',
};
/** yes|no options of a partner. */
const PARTNER_SWITCHES: Record<string, string> = {
  'billing-address-differs': 'billing_address_differs',
  'e-invoice': 'wants_e_invoice',
};
const PARTNER_OPTIONS = Object.fromEntries(
  [...Object.keys(PARTNER_TEXT_OPTIONS), ...Object.keys(PARTNER_SWITCHES)].map((name) => [
    name,
    { type: 'string' as const },
  ]),
);
const PARTNER_USAGE =
  '[--email EMAIL] [--city TEXT] [--country CODE|NAME] [… every partner key as --kebab-case option: --contact-person, --postal-code, --vat-id, --billing-street, …; --e-invoice and --billing-address-differs take yes|no]';

const PARTICIPATION_OPTIONS = {
  partner: { type: 'string' },
  channel: { type: 'string' },
  address: { type: 'string' },
  'price-cents': { type: 'string' },
  currency: { type: 'string' },
  caps: { type: 'string' },
  schedule: { type: 'string' },
  weight: { type: 'string' },
} as const;

function path(base: string, ...segments: string[]): string {
  return [base, ...segments.map((segment) => encodeURIComponent(segment))].join('/');
}

/** Distribution commands: partners, the setup of an entity, participations, rules, return reasons. */
export function distributionCommands(tools: ClientTools): Record<string, CommandSpec> {
  const { call, listAll, table, required, wholeNumber, usageError } = tools;

  function yesNo(value: string | boolean | undefined, name: string): boolean | undefined {
    if (value === undefined) return undefined;
    if (value === 'yes' || value === 'true') return true;
    if (value === 'no' || value === 'false') return false;
    throw usageError(`--${name} is yes or no, got "${value}"`);
  }

  /** A JSON option (`null` where the API takes it to remove a setting). */
  function json(value: string | boolean | undefined, name: string, example: string): unknown {
    if (typeof value !== 'string') return undefined;
    try {
      return JSON.parse(value);
    } catch {
      throw usageError(`--${name} is JSON, e.g. '${example}'`);
    }
  }

  function partnerBody(values: Values): Row {
    const body: Row = {};
    for (const [option, key] of Object.entries(PARTNER_TEXT_OPTIONS)) {
      if (typeof values[option] === 'string') body[key] = values[option];
    }
    for (const [option, key] of Object.entries(PARTNER_SWITCHES)) {
      const value = yesNo(values[option], option);
      if (value !== undefined) body[key] = value;
    }
    return body;
  }

  function participationBody(values: Values): Row {
    const body: Row = {};
    if (typeof values.partner === 'string') body.partner_id = values.partner;
    for (const key of ['channel', 'address', 'currency'] as const) {
      if (typeof values[key] === 'string') body[key] = values[key];
    }
    if (typeof values['price-cents'] === 'string')
      body.price_cents = wholeNumber(values['price-cents'], 'price-cents');
    if (typeof values.weight === 'string') body.weight = wholeNumber(values.weight, 'weight');
    const caps = json(values.caps, 'caps', '{"day":10,"month":200}');
    if (caps !== undefined) body.caps = caps;
    const schedule = json(
      values.schedule,
      'schedule',
      '{"time_zone":"Europe/Berlin","weekdays":[1,2,3,4,5],"from":"08:00","to":"18:00"}',
    );
    if (schedule !== undefined) body.schedule = schedule;
    return body;
  }

  function describeSetup(setup: Row): string {
    const participations = (setup.participations as Row[]).map((p) => ({
      ...p,
      price: `${p.price_cents} ${p.currency}`,
      state: p.paused ? `paused${p.paused_reason ? ` (${p.paused_reason})` : ''}` : 'active',
    }));
    const rules = (setup.rules as Row[]).map(
      (rule, index) =>
        `  ${index + 1}. ${rule.name}: ${rule.strategy}, up to ${rule.max_partners}, ${(rule.filter as unknown[]).length} conditions, from ${(rule.participation_ids as string[]).join(', ') || 'no participation'}`,
    );
    return [
      `distribution ${setup.id} of ${setup.entity}: ${setup.enabled ? 'enabled' : 'disabled'}, returns within ${setup.return_deadline_days} days, redistribute on return: ${setup.redistribute_on_return ? 'yes' : 'no'}`,
      'participations:',
      table(participations, ['id', 'partner_name', 'channel', 'address', 'price', 'state']),
      'rules:',
      rules.length > 0 ? rules.join('\n') : '  (none)',
    ].join('\n');
  }

  const secretLine = (answer: Row) => (answer.secret ? `\nsecret (shown once): ${answer.secret}` : '');

  return {
    'partners list': {
      usage: 'leads partners list [--search TEXT]',
      options: { search: { type: 'string' } },
      async run(connection, values) {
        const search = typeof values.search === 'string' ? `?q=${encodeURIComponent(values.search)}` : '';
        const rows = await listAll(connection, 'key', `${PARTNERS}${search}`, 'partner');
        const shown = rows.map((row) => ({ ...row, gaps: (row.gaps as string[]).join(',') }));
        return {
          json: { partner: rows },
          text: table(shown, ['id', 'name', 'city', 'country', 'email', 'gaps']),
        };
      },
    },
    'partners create': {
      usage: `leads partners create --name NAME ${PARTNER_USAGE}`,
      options: PARTNER_OPTIONS,
      async run(connection, values) {
        required(values.name, 'name');
        const created = (await call(connection, 'key', 'POST', PARTNERS, partnerBody(values))) as Row;
        return { json: created, text: `partner ${created.id} "${values.name}"` };
      },
    },
    'partners show': {
      usage: 'leads partners show PARTNER_ID',
      positionals: ['PARTNER_ID'],
      async run(connection, _values, [id]) {
        const partner = (await call(connection, 'key', 'GET', path(PARTNERS, id!))) as Row;
        const lines = Object.entries(partner)
          .filter(([key, value]) => !['id', 'name', 'gaps'].includes(key) && value !== null && value !== '')
          .map(([key, value]) => `${key}: ${value}`);
        const gaps = (partner.gaps as string[]).join(', ') || 'none';
        return {
          json: partner,
          text: [`partner ${partner.id} "${partner.name}"`, ...lines, `gaps: ${gaps}`].join('\n'),
        };
      },
    },
    'partners update': {
      usage: `leads partners update PARTNER_ID [--name NAME] ${PARTNER_USAGE} [--retired yes|no]`,
      positionals: ['PARTNER_ID'],
      options: { ...PARTNER_OPTIONS, retired: { type: 'string' } },
      async run(connection, values, [id]) {
        const body = partnerBody(values);
        const retired = yesNo(values.retired, 'retired');
        if (retired !== undefined) body.retired = retired;
        if (Object.keys(body).length === 0) throw usageError('name at least one option to change');
        const answer = await call(connection, 'key', 'PATCH', path(PARTNERS, id!), body);
        return { json: answer, text: `partner ${id} updated` };
      },
    },
    'partners retire': {
      usage: 'leads partners retire PARTNER_ID',
      positionals: ['PARTNER_ID'],
      async run(connection, _values, [id]) {
        const answer = await call(connection, 'key', 'DELETE', path(PARTNERS, id!));
        return { json: answer, text: `partner ${id} retired` };
      },
    },
    'distribution show': {
      usage: 'leads distribution show ENTITY',
      positionals: ['ENTITY'],
      async run(connection, _values, [entity]) {
        const setup = (await call(connection, 'key', 'GET', path(SETUPS, entity!))) as Row;
        return { json: setup, text: describeSetup(setup) };
      },
    },
    'distribution set': {
      usage:
        'leads distribution set ENTITY [--return-deadline-days N] [--redistribute-on-return yes|no] [--enabled yes|no]',
      positionals: ['ENTITY'],
      options: {
        'return-deadline-days': { type: 'string' },
        'redistribute-on-return': { type: 'string' },
        enabled: { type: 'string' },
      },
      async run(connection, values, [entity]) {
        const body: Row = {};
        if (typeof values['return-deadline-days'] === 'string') {
          body.return_deadline_days = wholeNumber(values['return-deadline-days'], 'return-deadline-days');
        }
        const redistribute = yesNo(values['redistribute-on-return'], 'redistribute-on-return');
        if (redistribute !== undefined) body.redistribute_on_return = redistribute;
        const enabled = yesNo(values.enabled, 'enabled');
        if (enabled !== undefined) body.enabled = enabled;
        const setup = (await call(connection, 'key', 'PUT', path(SETUPS, entity!), body)) as Row;
        return { json: setup, text: describeSetup(setup) };
      },
    },
    'distribution participations add': {
      usage:
        'leads distribution participations add ENTITY --partner PARTNER_ID --channel webhook|email --address URL|EMAIL --price-cents N [--currency EUR] [--caps JSON] [--schedule JSON] [--weight N] [--paused]',
      positionals: ['ENTITY'],
      options: { ...PARTICIPATION_OPTIONS, paused: { type: 'boolean' } },
      async run(connection, values, [entity]) {
        for (const name of ['partner', 'channel', 'address', 'price-cents']) required(values[name], name);
        const body = participationBody(values);
        if (values.paused === true) body.paused = true;
        const created = (await call(
          connection,
          'key',
          'POST',
          `${path(SETUPS, entity!)}/participations`,
          body,
        )) as Row;
        return {
          json: created,
          text: `participation ${created.id} of ${created.partner_name} via ${created.channel} ${created.address}${secretLine(created)}`,
        };
      },
    },
    'distribution participations update': {
      usage:
        'leads distribution participations update PARTICIPATION_ID [--partner ID] [--channel webhook|email] [--address URL|EMAIL] [--price-cents N] [--currency CODE] [--caps JSON|null] [--schedule JSON|null] [--weight N] [--paused yes|no] [--rotate-secret]',
      positionals: ['PARTICIPATION_ID'],
      options: { ...PARTICIPATION_OPTIONS, paused: { type: 'string' }, 'rotate-secret': { type: 'boolean' } },
      async run(connection, values, [id]) {
        const body = participationBody(values);
        const paused = yesNo(values.paused, 'paused');
        if (paused !== undefined) body.paused = paused;
        if (values['rotate-secret'] === true) body.rotate_secret = true;
        if (Object.keys(body).length === 0) throw usageError('name at least one option to change');
        const updated = (await call(
          connection,
          'key',
          'PATCH',
          path('/api/v1/settings/participations', id!),
          body,
        )) as Row;
        return { json: updated, text: `participation ${id} updated${secretLine(updated)}` };
      },
    },
    'distribution participations remove': {
      usage: 'leads distribution participations remove PARTICIPATION_ID',
      positionals: ['PARTICIPATION_ID'],
      async run(connection, _values, [id]) {
        await call(connection, 'key', 'DELETE', path('/api/v1/settings/participations', id!));
        return { json: { id, removed: true }, text: `participation ${id} removed` };
      },
    },
    'distribution rules set': {
      usage:
        'leads distribution rules set ENTITY --rules JSON   (the ordered array: [{name, filter?, strategy, max_partners?, participation_ids}])',
      positionals: ['ENTITY'],
      options: { rules: { type: 'string' } },
      async run(connection, values, [entity]) {
        const rules = json(
          required(values.rules, 'rules'),
          'rules',
          '[{"name":"All","strategy":"all","participation_ids":["…"]}]',
        );
        if (!Array.isArray(rules)) throw usageError('--rules is a JSON array of rules');
        const answer = (await call(
          connection,
          'key',
          'PUT',
          `${path(SETUPS, entity!)}/rules`,
          rules,
        )) as Row[];
        const names = answer.map((rule) => rule.name).join(', ');
        return { json: answer, text: `${answer.length} rules set${names ? `: ${names}` : ''}` };
      },
    },
    'distribution start': {
      usage: 'leads distribution start RECORD_ID',
      positionals: ['RECORD_ID'],
      async run(connection, _values, [recordId]) {
        const answer = (await call(connection, 'key', 'POST', '/api/v1/distribution/distributions', {
          record_id: recordId,
        })) as Row;
        const partners = (answer.partner as Row[] | undefined) ?? [];
        const lines = [
          `run ${answer.run_id}: ${answer.status}${answer.reason ? ` (${answer.reason})` : ''}, ${answer.partner_count} partners, ${answer.price_total} cents`,
        ];
        if (partners.length > 0) lines.push(table(partners, ['name', 'channel', 'price_cents', 'status']));
        return { json: answer, text: lines.join('\n') };
      },
    },
    'distribution run': {
      usage: 'leads distribution run RUN_ID',
      positionals: ['RUN_ID'],
      async run(connection, _values, [id]) {
        const run = (await call(
          connection,
          'key',
          'GET',
          path('/api/v1/distribution/distributions', id!),
        )) as Row;
        return {
          json: run,
          text: [
            `run ${run.id} of record ${run.record_id}: ${run.status} (${run.triggered_by}, ${run.started_at})`,
            table((run.deliveries as Row[]) ?? [], [
              'id',
              'partner',
              'status',
              'price_cents',
              'currency',
              'attempts',
            ]),
          ].join('\n'),
        };
      },
    },
    'distribution deliveries': {
      usage:
        'leads distribution deliveries [--status STATUS] [--partner PARTNER_ID] [--from DATE|TIME] [--to DATE|TIME] [--limit N]',
      options: {
        status: { type: 'string' },
        partner: { type: 'string' },
        from: { type: 'string' },
        to: { type: 'string' },
        limit: { type: 'string' },
      },
      async run(connection, values) {
        const query = new URLSearchParams();
        for (const [option, key] of [
          ['status', 'status'],
          ['partner', 'partner_id'],
          ['from', 'from'],
          ['to', 'to'],
        ] as const) {
          const value = values[option];
          if (typeof value === 'string') query.set(key, value);
        }
        if (typeof values.limit === 'string') query.set('limit', String(wholeNumber(values.limit, 'limit')));
        const suffix = query.size > 0 ? `?${query}` : '';
        const answer = (await call(connection, 'key', 'GET', `/api/v1/distribution/deliveries${suffix}`)) as {
          deliveries: Row[];
        };
        return {
          json: answer,
          text: table(answer.deliveries, [
            'id',
            'created_at',
            'partner',
            'rule',
            'status',
            'price_cents',
            'record_id',
          ]),
        };
      },
    },
    'distribution return': {
      usage: 'leads distribution return DELIVERY_ID [--reason REASON_ID] [--text TEXT] [--reported-by NAME]',
      positionals: ['DELIVERY_ID'],
      options: { reason: { type: 'string' }, text: { type: 'string' }, 'reported-by': { type: 'string' } },
      async run(connection, values, [id]) {
        const body: Row = {};
        if (typeof values.reason === 'string') body.reason_id = values.reason;
        if (typeof values.text === 'string') body.text = values.text;
        if (typeof values['reported-by'] === 'string') body.reported_by = values['reported-by'];
        const answer = (await call(
          connection,
          'key',
          'POST',
          `${path('/api/v1/distribution/deliveries', id!)}/return`,
          body,
        )) as Row;
        return {
          json: answer,
          text: `delivery ${id} returned${answer.redistributed ? ', record distributed again' : ''}`,
        };
      },
    },
    'distribution participations test': {
      usage: 'leads distribution participations test PARTICIPATION_ID',
      positionals: ['PARTICIPATION_ID'],
      async run(connection, _values, [id]) {
        const answer = (await call(
          connection,
          'key',
          'POST',
          `${path('/api/v1/distribution/participations', id!)}/test`,
        )) as Row;
        return {
          json: answer,
          text: `${answer.ok ? 'ok' : 'failed'}: ${answer.channel} ${answer.status} ${answer.message}`,
        };
      },
    },
    'distribution return-reasons add': {
      usage: 'leads distribution return-reasons add --name NAME',
      options: { name: { type: 'string' } },
      async run(connection, values) {
        const reason = (await call(connection, 'key', 'POST', '/api/v1/settings/return-reasons', {
          name: required(values.name, 'name'),
        })) as Row;
        return { json: reason, text: `return reason ${reason.id} "${reason.name}"` };
      },
    },
    'distribution return-reasons list': {
      usage: 'leads distribution return-reasons list',
      async run(connection) {
        const reasons = await listAll(connection, 'key', '/api/v1/settings/return-reasons', 'return_reasons');
        return { json: { return_reasons: reasons }, text: table(reasons, ['id', 'name']) };
      },
    },
    'distribution return-reasons remove': {
      usage: 'leads distribution return-reasons remove REASON_ID',
      positionals: ['REASON_ID'],
      async run(connection, _values, [id]) {
        await call(connection, 'key', 'DELETE', path('/api/v1/settings/return-reasons', id!));
        return { json: { id, removed: true }, text: `return reason ${id} removed` };
      },
    },
  };
}

import fs from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { distributionCommands } from './distribution-commands.ts';

/** Thin clients of the operator and settings APIs (decisions §2): each command is one or a few calls. */

export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  env: Record<string, string | undefined>;
}

export interface Connection {
  url: string;
  key: string | undefined;
  adminToken: string | undefined;
}

/** Exit codes: 1 when the service refused or could not be reached, 2 when the command line is wrong. */
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

class CliError extends Error {
  readonly exitCode: number;
  /** The service's error answer, printed as is with --json. */
  readonly answer: unknown;

  constructor(message: string, exitCode: number = EXIT_FAILED, answer?: unknown) {
    super(message);
    this.exitCode = exitCode;
    this.answer = answer;
  }
}

const usageError = (message: string) => new CliError(message, EXIT_USAGE);

/** An entities file is read whole; far above any real set of entity definitions. */
const MAX_ENTITIES_FILE_BYTES = 16 * 1024 * 1024;
/** Lists are followed through their cursors; a service handing out cursors forever is cut off here. */
const MAX_LIST_PAGES = 1_000;
const REQUEST_TIMEOUT_MS = 30_000;

function targetUrl(connection: Connection, path: string): URL {
  // Appended rather than resolved, so that a service behind a path prefix (--url https://host/leads) works.
  let url: URL;
  try {
    url = new URL(connection.url.replace(/\/+$/, '') + path);
  } catch {
    throw usageError(`--url is not a valid address: ${connection.url}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw usageError(`--url must start with http:// or https://, got ${connection.url}`);
  }
  return url;
}

async function call(
  connection: Connection,
  credential: 'key' | 'admin',
  method: string,
  path: string,
  body?: unknown,
): Promise<unknown> {
  const secret = credential === 'admin' ? connection.adminToken : connection.key;
  if (!secret) {
    throw usageError(
      credential === 'admin'
        ? 'this command needs the operator token: --admin-token or LEADS_ADMIN_TOKEN'
        : 'this command needs an API key: --key or LEADS_API_KEY',
    );
  }
  let response: Response;
  let text: string;
  try {
    response = await fetch(targetUrl(connection, path), {
      method,
      headers: {
        authorization: `Bearer ${secret}`,
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    text = await response.text();
  } catch (error) {
    if (error instanceof CliError) throw error;
    // fetch reports "fetch failed" and keeps the reason (ECONNREFUSED, ENOTFOUND, …) in `cause`.
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const reason = cause?.code ?? cause?.message ?? (error as Error).message;
    throw new CliError(`cannot reach ${connection.url}: ${reason}`);
  }
  let parsed: unknown = null;
  if (text !== '') {
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new CliError(
        `${method} ${path}: the answer (${response.status}) is not JSON; is ${connection.url} a Leadline service?`,
      );
    }
  }
  if (!response.ok) {
    const answer = parsed as {
      error?: unknown;
      message?: unknown;
      details?: { key: string; message: string }[];
    } | null;
    const code = typeof answer?.error === 'string' ? answer.error : `http_${response.status}`;
    // The service's sentence says what to do (a conflict names the rule that holds it).
    const said = typeof answer?.message === 'string' ? `: ${answer.message}` : '';
    const extra = Array.isArray(answer?.details)
      ? answer.details.map((d) => `\n  ${d.key}: ${d.message}`).join('')
      : '';
    throw new CliError(
      `${method} ${path} failed: ${response.status} ${code}${said}${extra}`,
      EXIT_FAILED,
      parsed,
    );
  }
  return parsed;
}

export type Row = Record<string, unknown>;

function table(rows: Row[], columns: string[]): string {
  if (rows.length === 0) return '(none)';
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c] ?? '').length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(columns), ...rows.map((r) => line(columns.map((c) => String(r[c] ?? ''))))].join('\n');
}

export interface CommandSpec {
  usage: string;
  /**
   * The credential the command authenticates with: the operator token for the `accounts`
   * commands, an API key (the default) for the others. Only its option is taken.
   */
  credential?: 'key' | 'admin';
  options?: Record<string, { type: 'string' | 'boolean' }>;
  /** Names of the positional arguments, all required. */
  positionals?: string[];
  run(
    connection: Connection,
    values: Record<string, string | boolean | undefined>,
    positionals: string[],
  ): Promise<{ json: unknown; text: string }>;
}

const list = (value: unknown) =>
  typeof value === 'string'
    ? value
        .split(',')
        .map((v) => v.trim())
        .filter(Boolean)
    : undefined;

function required(value: string | boolean | undefined, name: string): string {
  if (typeof value !== 'string' || value === '') throw usageError(`--${name} is required`);
  return value;
}

/**
 * The body of an update command, refused when it changes nothing: the service would answer an
 * empty PATCH with the unchanged resource, and the command would report a change that did not
 * happen. The same words as `partners update` and `participations update`.
 */
function somethingToChange(body: Row): Row {
  if (Object.keys(body).length === 0) throw usageError('name at least one option to change');
  return body;
}

function wholeNumber(value: string, name: string): number {
  if (!/^\d{1,9}$/.test(value)) throw usageError(`--${name} must be a whole number, got "${value}"`);
  return Number(value);
}

/**
 * `leads webhooks attempts`, `leads automations attempts` and `leads distribution attempts`: the
 * newest attempts of what the webhook, automation or delivery sent, one page (`--limit`, 100 by
 * default): the service keeps 30 days. `base` is the collection the id belongs to.
 */
function attemptsCommand(command: string, idName: string, base: string): CommandSpec {
  return {
    usage: `leads ${command} ${idName} [--limit N]   (newest first)`,
    positionals: [idName],
    options: { limit: { type: 'string' } },
    async run(connection, values, [id]) {
      const limit = typeof values.limit === 'string' ? wholeNumber(values.limit, 'limit') : 100;
      const answer = (await call(
        connection,
        'key',
        'GET',
        `${base}/${encodeURIComponent(id!)}/attempts?limit=${limit}`,
      )) as { attempts: Row[] };
      return {
        json: answer,
        text: table(answer.attempts, [
          'attempted_at',
          'event',
          'attempt',
          'outcome',
          'status_code',
          'duration_ms',
          'error',
        ]),
      };
    },
  };
}

/** Every list is followed to its end through `next_cursor`. */
async function listAll(
  connection: Connection,
  credential: 'key' | 'admin',
  path: string,
  field: string,
): Promise<Row[]> {
  const rows: Row[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < MAX_LIST_PAGES; page++) {
    const answer = (await call(
      connection,
      credential,
      'GET',
      `${path}${path.includes('?') ? '&' : '?'}limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    )) as Record<string, unknown>;
    rows.push(...((answer[field] as Row[]) ?? []));
    cursor = (answer.next_cursor as string | null) ?? null;
    if (!cursor) return rows;
  }
  throw new CliError(`${path} did not end after ${MAX_LIST_PAGES} pages`);
}

/** The definitions of an entities file, their form (JSON, objects with a `key`) checked before the first is sent; the service checks each when it arrives. */
async function readEntityDefinitions(file: string): Promise<Row[]> {
  let parsed: unknown;
  try {
    const { size } = await fs.stat(file);
    if (size > MAX_ENTITIES_FILE_BYTES) {
      throw usageError(`${file} is larger than ${MAX_ENTITIES_FILE_BYTES / 1024 / 1024} MiB`);
    }
    parsed = JSON.parse(await fs.readFile(file, 'utf8'));
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw usageError(`cannot read ${file}: ${(error as Error).message}`);
  }
  const definitions = Array.isArray(parsed) ? parsed : [parsed];
  if (definitions.length === 0) throw usageError(`${file} holds no entity`);
  definitions.forEach((definition, index) => {
    const where = Array.isArray(parsed) ? `entity ${index + 1} of ${file}` : file;
    if (typeof definition !== 'object' || definition === null || Array.isArray(definition)) {
      throw usageError(`${where} is not a JSON object`);
    }
    const key = (definition as Row).key;
    if (typeof key !== 'string' || key === '') throw usageError(`${where} needs a "key"`);
  });
  return definitions as Row[];
}

const CALENDAR_OPTIONS = {
  name: { type: 'string' },
  'time-zone': { type: 'string' },
  weekly: { type: 'string' },
  exceptions: { type: 'string' },
  'slot-minutes': { type: 'string' },
  'buffer-minutes': { type: 'string' },
  'min-notice-minutes': { type: 'string' },
  'horizon-days': { type: 'string' },
  capacity: { type: 'string' },
  default: { type: 'boolean' },
} as const;
/** A source's website-form settings as options (decisions §13). */
const FORM_SETTINGS_OPTIONS = {
  'success-url': { type: 'string' },
  'error-url': { type: 'string' },
  'allowed-origins': { type: 'string' },
  'honeypot-field': { type: 'string' },
  'rate-limit': { type: 'string' },
} as const;
const FORM_SETTINGS_USAGE =
  '[--success-url URL] [--error-url URL] [--allowed-origins https://a.example,…] [--honeypot-field NAME] [--rate-limit N]';

/** The settings given on the command line; an empty address or trap name clears it (null). */
function formSettings(values: Record<string, string | boolean | undefined>): Row {
  const body: Row = {};
  for (const [option, key] of [
    ['success-url', 'success_url'],
    ['error-url', 'error_url'],
    ['honeypot-field', 'honeypot_field'],
  ] as const) {
    const value = values[option];
    if (typeof value === 'string') body[key] = value === '' ? null : value;
  }
  const origins = values['allowed-origins'];
  if (typeof origins === 'string') body.allowed_origins = list(origins);
  const rate = values['rate-limit'];
  if (typeof rate === 'string') body.rate_limit_per_minute = wholeNumber(rate, 'rate-limit');
  return body;
}

function describeFormSettings(source: Row): string {
  const origins = (source.allowed_origins as string[] | undefined) ?? [];
  return [
    `success_url: ${source.success_url ?? '(the service’s page)'}`,
    `error_url: ${source.error_url ?? '(the service’s page)'}`,
    `allowed_origins: ${origins.length > 0 ? origins.join(', ') : '(any)'}`,
    `honeypot_field: ${source.honeypot_field ?? '(none)'}`,
    `rate_limit_per_minute: ${source.rate_limit_per_minute}`,
  ].join('\n');
}

const NEW_KEY_OPTIONS = {
  name: { type: 'string' },
  strict: { type: 'boolean' },
  permissions: { type: 'string' },
} as const;

/**
 * The body of a new API key (`keys create`, `accounts key`): `name` only when given. A
 * `--permissions` that names none (`""`, blanks, commas) is a usage error: it would make a key
 * that may do nothing (the API documents no such key), where leaving the option out gives every
 * permission the maker may give.
 */
function newKeyBody(values: Record<string, string | boolean | undefined>): Row {
  const body: Row = { strict: values.strict === true };
  if (typeof values.name === 'string') body.name = values.name;
  if (values.permissions !== undefined) {
    const permissions = list(values.permissions) ?? [];
    if (permissions.length === 0) {
      throw usageError(
        '--permissions names no permission; name at least one (records:read,…), or leave the option out for every permission you may give',
      );
    }
    body.permissions = permissions;
  }
  return body;
}

const newKeyText = (key: Row) => `key ${key.id} "${key.name}"\nvalue (shown once): ${key.key}`;

export const HTTP_COMMANDS: Record<string, CommandSpec> = {
  'accounts create': {
    usage: 'leads accounts create --name NAME [--modules crm,distribution,booking] [--rate-limit N]',
    credential: 'admin',
    options: { name: { type: 'string' }, modules: { type: 'string' }, 'rate-limit': { type: 'string' } },
    async run(connection, values) {
      const body: Row = { name: required(values.name, 'name') };
      if (values.modules !== undefined) body.modules = list(values.modules);
      if (typeof values['rate-limit'] === 'string') {
        body.rate_limit_per_minute = wholeNumber(values['rate-limit'], 'rate-limit');
      }
      const account = (await call(connection, 'admin', 'POST', '/admin/v1/accounts', body)) as Row & {
        api_key: { key: string };
      };
      return {
        json: account,
        text: `account ${account.id} "${account.name}" (modules: ${(account.modules as string[]).join(', ') || 'none'})\nAPI key (shown once): ${account.api_key.key}`,
      };
    },
  },
  'accounts list': {
    usage: 'leads accounts list',
    credential: 'admin',
    async run(connection) {
      const rows = await listAll(connection, 'admin', '/admin/v1/accounts', 'accounts');
      return {
        json: { accounts: rows },
        text: table(rows, ['id', 'name', 'modules', 'rate_limit_per_minute']),
      };
    },
  },
  'accounts key': {
    usage:
      'leads accounts key ACCOUNT_ID [--name NAME] [--strict] [--permissions records:read,records:write,…]   (a new API key for the account, e.g. when its keys are revoked)',
    credential: 'admin',
    options: NEW_KEY_OPTIONS,
    positionals: ['ACCOUNT_ID'],
    async run(connection, values, [id]) {
      const path = `/admin/v1/accounts/${encodeURIComponent(id!)}/api-keys`;
      const key = (await call(connection, 'admin', 'POST', path, newKeyBody(values))) as Row;
      return { json: key, text: newKeyText(key) };
    },
  },
  'keys create': {
    usage: 'leads keys create --name NAME [--strict] [--permissions records:read,records:write,…]',
    options: NEW_KEY_OPTIONS,
    async run(connection, values) {
      const body: Row = { ...newKeyBody(values), name: required(values.name, 'name') };
      const key = (await call(connection, 'key', 'POST', '/api/v1/settings/api-keys', body)) as Row;
      return { json: key, text: newKeyText(key) };
    },
  },
  'keys list': {
    usage: 'leads keys list',
    async run(connection) {
      const rows = await listAll(connection, 'key', '/api/v1/settings/api-keys', 'api_keys');
      return {
        json: { api_keys: rows },
        text: table(rows, ['id', 'name', 'prefix', 'strict', 'created_at']),
      };
    },
  },
  'keys revoke': {
    usage: 'leads keys revoke KEY_ID',
    positionals: ['KEY_ID'],
    async run(connection, _values, [id]) {
      await call(connection, 'key', 'DELETE', `/api/v1/settings/api-keys/${encodeURIComponent(id!)}`);
      return { json: { id, revoked: true }, text: `key ${id} revoked` };
    },
  },
  'sources create': {
    usage: `leads sources create --name NAME ${FORM_SETTINGS_USAGE}`,
    options: { name: { type: 'string' }, ...FORM_SETTINGS_OPTIONS },
    async run(connection, values) {
      const source = (await call(connection, 'key', 'POST', '/api/v1/settings/sources', {
        name: required(values.name, 'name'),
        ...formSettings(values),
      })) as Row;
      return {
        json: source,
        text: `source ${source.id} "${source.name}"\ntoken (shown once): ${source.token}\n${describeFormSettings(source)}`,
      };
    },
  },
  'sources get': {
    usage: 'leads sources get SOURCE_ID',
    positionals: ['SOURCE_ID'],
    async run(connection, _values, [id]) {
      const source = (await call(
        connection,
        'key',
        'GET',
        `/api/v1/settings/sources/${encodeURIComponent(id!)}`,
      )) as Row;
      return {
        json: source,
        text: `source ${source.id} "${source.name}" (token ${source.token_prefix ?? 'revoked'}…)\n${describeFormSettings(source)}`,
      };
    },
  },
  'sources update': {
    usage: `leads sources update SOURCE_ID [--name NAME] ${FORM_SETTINGS_USAGE}   (an option left out is unchanged; "" clears an address or the trap)`,
    positionals: ['SOURCE_ID'],
    options: { name: { type: 'string' }, ...FORM_SETTINGS_OPTIONS },
    async run(connection, values, [id]) {
      const body: Row = formSettings(values);
      if (typeof values.name === 'string') body.name = values.name;
      const source = (await call(
        connection,
        'key',
        'PATCH',
        `/api/v1/settings/sources/${encodeURIComponent(id!)}`,
        somethingToChange(body),
      )) as Row;
      return { json: source, text: `source ${source.id} "${source.name}"\n${describeFormSettings(source)}` };
    },
  },
  'sources list': {
    usage: 'leads sources list',
    async run(connection) {
      const rows = await listAll(connection, 'key', '/api/v1/settings/sources', 'sources');
      return { json: { sources: rows }, text: table(rows, ['id', 'name', 'token_prefix', 'created_at']) };
    },
  },
  'sources rotate': {
    usage: 'leads sources rotate SOURCE_ID',
    positionals: ['SOURCE_ID'],
    async run(connection, _values, [id]) {
      const result = (await call(
        connection,
        'key',
        'POST',
        `/api/v1/settings/sources/${encodeURIComponent(id!)}/token`,
      )) as Row;
      return { json: result, text: `new token (shown once; the old one no longer works): ${result.token}` };
    },
  },
  'sources revoke': {
    usage: 'leads sources revoke SOURCE_ID',
    positionals: ['SOURCE_ID'],
    async run(connection, _values, [id]) {
      await call(connection, 'key', 'DELETE', `/api/v1/settings/sources/${encodeURIComponent(id!)}/token`);
      return { json: { id, revoked: true }, text: `token of source ${id} revoked` };
    },
  },
  'entities list': {
    usage: 'leads entities list',
    async run(connection) {
      const result = (await call(connection, 'key', 'GET', '/api/v1/settings/entities')) as {
        entities: Row[];
      };
      const rows = result.entities.map((e) => ({ ...e, fields: (e.fields as unknown[]).length }));
      return { json: result, text: table(rows, ['key', 'name', 'archived', 'fields']) };
    },
  },
  'entities apply': {
    usage:
      'leads entities apply FILE   (JSON: {key, name, fields, duplicate_rule?, pipelines?} or an array of them)',
    positionals: ['FILE'],
    async run(connection, _values, [file]) {
      const definitions = await readEntityDefinitions(file!);
      const applied: Row[] = [];
      for (const { key, ...body } of definitions) {
        try {
          applied.push(
            (await call(
              connection,
              'key',
              'PUT',
              `/api/v1/settings/entities/${encodeURIComponent(key as string)}`,
              body,
            )) as Row,
          );
        } catch (error) {
          // Each PUT stands on its own: say which ones are in place already.
          if (!(error instanceof CliError) || applied.length === 0) throw error;
          const done = applied.map((e) => e.key).join(', ');
          throw new CliError(
            `${error.message}\n(applied before this failure: ${done})`,
            error.exitCode,
            error.answer,
          );
        }
      }
      return {
        json: { entities: applied },
        // The service's warnings (stored values the change may leave unfitting) under each.
        text: applied
          .map((e) =>
            [
              `applied ${e.key}`,
              ...((e.warnings as { message?: string }[] | undefined) ?? []).map(
                (warning) => `  warning: ${warning.message}`,
              ),
            ].join('\n'),
          )
          .join('\n'),
      };
    },
  },
  'users create': {
    usage:
      'leads users create --email EMAIL --name NAME [--role owner|admin|member|viewer] [--invite [--language en|de]]',
    options: {
      email: { type: 'string' },
      name: { type: 'string' },
      role: { type: 'string' },
      invite: { type: 'boolean' },
      language: { type: 'string' },
    },
    async run(connection, values) {
      const body: Row = { email: required(values.email, 'email'), name: required(values.name, 'name') };
      if (values.role !== undefined) body.role = values.role;
      if (values.invite === true) body.invite = true;
      // Without --invite the service refuses it, as it does nothing then.
      if (values.language !== undefined) body.language = values.language;
      const user = (await call(connection, 'key', 'POST', '/api/v1/settings/users', body)) as Row;
      const invited =
        typeof user.invited_until === 'string'
          ? ` (invited; the link works until ${user.invited_until})`
          : '';
      return { json: user, text: `user ${user.id} ${user.email}${invited}` };
    },
  },
  'users list': {
    usage: 'leads users list',
    async run(connection) {
      const rows = await listAll(connection, 'key', '/api/v1/settings/users', 'users');
      return { json: { users: rows }, text: table(rows, ['id', 'email', 'name', 'role']) };
    },
  },
  'users update': {
    usage:
      'leads users update USER_ID [--name NAME] [--role owner|admin|member|viewer]   (a new role signs the user out)',
    options: { name: { type: 'string' }, role: { type: 'string' } },
    positionals: ['USER_ID'],
    async run(connection, values, [id]) {
      const body: Row = {};
      if (values.name !== undefined) body.name = values.name;
      if (values.role !== undefined) body.role = values.role;
      const user = (await call(
        connection,
        'key',
        'PATCH',
        `/api/v1/settings/users/${encodeURIComponent(id!)}`,
        somethingToChange(body),
      )) as Row;
      return { json: user, text: `user ${user.id} ${user.email} ${user.role}` };
    },
  },
  'users remove': {
    usage: 'leads users remove USER_ID   (signs the user out and takes them off their records)',
    positionals: ['USER_ID'],
    async run(connection, _values, [id]) {
      await call(connection, 'key', 'DELETE', `/api/v1/settings/users/${encodeURIComponent(id!)}`);
      return { json: { id, removed: true }, text: `removed user ${id}` };
    },
  },
  'automations create': {
    usage:
      'leads automations create --name NAME --entity KEY --stage STAGE [--pipeline NAME] --action JSON [--disabled]',
    options: {
      name: { type: 'string' },
      entity: { type: 'string' },
      stage: { type: 'string' },
      pipeline: { type: 'string' },
      action: { type: 'string' },
      disabled: { type: 'boolean' },
    },
    async run(connection, values) {
      let action: unknown;
      try {
        action = JSON.parse(required(values.action, 'action'));
      } catch (error) {
        if (error instanceof CliError) throw error;
        throw usageError('--action is a JSON object, e.g. \'{"type":"note","body":"Won"}\'');
      }
      const body: Row = {
        name: required(values.name, 'name'),
        entity: required(values.entity, 'entity'),
        stage: required(values.stage, 'stage'),
        action,
        enabled: values.disabled !== true,
      };
      if (typeof values.pipeline === 'string') body.pipeline = values.pipeline;
      const automation = (await call(connection, 'key', 'POST', '/api/v1/settings/automations', body)) as Row;
      const secret = automation.secret ? `\nsecret (shown once): ${automation.secret}` : '';
      return {
        json: automation,
        text: `automation ${automation.id} ${automation.name} on ${automation.pipeline}/${automation.stage}${secret}`,
      };
    },
  },
  'automations list': {
    usage: 'leads automations list',
    async run(connection) {
      const rows = await listAll(connection, 'key', '/api/v1/settings/automations', 'automations');
      const shown = rows.map((row) => ({ ...row, type: (row.action as Row).type }));
      return {
        json: { automations: rows },
        text: table(shown, ['id', 'name', 'entity', 'pipeline', 'stage', 'type', 'enabled']),
      };
    },
  },
  'automations enable': {
    usage: 'leads automations enable AUTOMATION_ID',
    positionals: ['AUTOMATION_ID'],
    run: (connection, _values, [id]) => switchAutomation(connection, id!, true),
  },
  'automations disable': {
    usage: 'leads automations disable AUTOMATION_ID',
    positionals: ['AUTOMATION_ID'],
    run: (connection, _values, [id]) => switchAutomation(connection, id!, false),
  },
  'automations attempts': attemptsCommand(
    'automations attempts',
    'AUTOMATION_ID',
    '/api/v1/settings/automations',
  ),
  'automations delete': {
    usage: 'leads automations delete AUTOMATION_ID',
    positionals: ['AUTOMATION_ID'],
    async run(connection, _values, [id]) {
      await call(connection, 'key', 'DELETE', `/api/v1/settings/automations/${encodeURIComponent(id!)}`);
      return { json: { id, deleted: true }, text: `automation ${id} deleted` };
    },
  },
  'calendars create': {
    usage:
      'leads calendars create --name NAME --time-zone ZONE --weekly JSON [--exceptions JSON] [--slot-minutes N] [--buffer-minutes N] [--min-notice-minutes N] [--horizon-days N] [--capacity N] [--default]',
    options: CALENDAR_OPTIONS,
    async run(connection, values) {
      const body = calendarBody(values);
      body.name = required(values.name, 'name');
      body.time_zone = required(values['time-zone'], 'time-zone');
      body.weekly = jsonOption(required(values.weekly, 'weekly'), 'weekly');
      const calendar = (await call(
        connection,
        'key',
        'POST',
        '/api/v1/settings/booking/calendars',
        body,
      )) as Row;
      return { json: calendar, text: calendarLine(calendar) };
    },
  },
  'calendars update': {
    usage:
      'leads calendars update CALENDAR_ID [--name NAME] [--time-zone ZONE] [--weekly JSON] [--exceptions JSON] [--slot-minutes N] [--buffer-minutes N] [--min-notice-minutes N] [--horizon-days N] [--capacity N] [--default]',
    options: CALENDAR_OPTIONS,
    positionals: ['CALENDAR_ID'],
    async run(connection, values, [id]) {
      const body = calendarBody(values);
      if (typeof values.name === 'string') body.name = values.name;
      if (typeof values['time-zone'] === 'string') body.time_zone = values['time-zone'];
      if (typeof values.weekly === 'string') body.weekly = jsonOption(values.weekly, 'weekly');
      const calendar = (await call(
        connection,
        'key',
        'PATCH',
        `/api/v1/settings/booking/calendars/${encodeURIComponent(id!)}`,
        somethingToChange(body),
      )) as Row;
      return { json: calendar, text: calendarLine(calendar) };
    },
  },
  'calendars list': {
    usage: 'leads calendars list',
    async run(connection) {
      const rows = await listAll(connection, 'key', '/api/v1/settings/booking/calendars', 'calendars');
      return {
        json: { calendars: rows },
        text: table(rows, ['id', 'name', 'time_zone', 'slot_minutes', 'capacity', 'default']),
      };
    },
  },
  'calendars delete': {
    usage: 'leads calendars delete CALENDAR_ID',
    positionals: ['CALENDAR_ID'],
    async run(connection, _values, [id]) {
      await call(
        connection,
        'key',
        'DELETE',
        `/api/v1/settings/booking/calendars/${encodeURIComponent(id!)}`,
      );
      return { json: { id, deleted: true }, text: `calendar ${id} deleted` };
    },
  },
  'appointments list': {
    usage: 'leads appointments list [--from TIME] [--to TIME] [--calendar CALENDAR_ID] [--record RECORD_ID]',
    options: {
      from: { type: 'string' },
      to: { type: 'string' },
      calendar: { type: 'string' },
      record: { type: 'string' },
    },
    async run(connection, values) {
      const query = new URLSearchParams();
      for (const [option, name] of [
        ['from', 'from'],
        ['to', 'to'],
        ['calendar', 'calendar_id'],
        ['record', 'record_id'],
      ] as const) {
        const value = values[option];
        if (typeof value === 'string') query.set(name, value);
      }
      const path = `/api/v1/booking/appointments${query.size > 0 ? `?${query}` : ''}`;
      const rows = await listAll(connection, 'key', path, 'appointments');
      return {
        json: { appointments: rows },
        text: table(rows, ['id', 'starts_at', 'ends_at', 'title', 'status', 'record_id']),
      };
    },
  },
  'appointments cancel': {
    usage: 'leads appointments cancel APPOINTMENT_ID [--reason TEXT]',
    options: { reason: { type: 'string' } },
    positionals: ['APPOINTMENT_ID'],
    async run(connection, values, [id]) {
      const body: Row = typeof values.reason === 'string' ? { reason: values.reason } : {};
      const appointment = (await call(
        connection,
        'key',
        'POST',
        `/api/v1/booking/appointments/${encodeURIComponent(id!)}/cancel`,
        body,
      )) as Row;
      return { json: appointment, text: `appointment ${id} ${appointment.status}` };
    },
  },
  'webhooks create': {
    usage: 'leads webhooks create --endpoint URL --events record.created,note.added|* [--description TEXT]',
    // --url is the service's address, as for every command.
    options: { endpoint: { type: 'string' }, events: { type: 'string' }, description: { type: 'string' } },
    async run(connection, values) {
      const body: Row = {
        url: required(values.endpoint, 'endpoint'),
        events: list(required(values.events, 'events')),
      };
      if (typeof values.description === 'string') body.description = values.description;
      const webhook = (await call(connection, 'key', 'POST', '/api/v1/settings/webhooks', body)) as Row;
      return {
        json: webhook,
        text: `webhook ${webhook.id} ${webhook.url} (events: ${(webhook.events as string[]).join(', ')})
secret (shown once): ${webhook.secret}`,
      };
    },
  },
  'webhooks list': {
    usage: 'leads webhooks list',
    async run(connection) {
      const rows = await listAll(connection, 'key', '/api/v1/settings/webhooks', 'webhooks');
      return { json: { webhooks: rows }, text: table(rows, ['id', 'url', 'events', 'enabled']) };
    },
  },
  'webhooks test': {
    usage: 'leads webhooks test WEBHOOK_ID',
    positionals: ['WEBHOOK_ID'],
    async run(connection, _values, [id]) {
      const result = (await call(
        connection,
        'key',
        'POST',
        `/api/v1/settings/webhooks/${encodeURIComponent(id!)}/test`,
      )) as Row;
      const answer =
        result.status_code === null ? String(result.error) : `${result.status_code} ${result.body ?? ''}`;
      // A test that did not arrive is a failed command, so that scripts can check an endpoint.
      if (result.delivered !== true)
        throw new CliError(`not delivered: ${answer.trim()}`, EXIT_FAILED, result);
      return { json: result, text: `delivered: ${answer.trim()} (${result.duration_ms} ms)` };
    },
  },
  'webhooks recover': {
    usage: 'leads webhooks recover WEBHOOK_ID --since TIME [--until TIME]',
    positionals: ['WEBHOOK_ID'],
    options: { since: { type: 'string' }, until: { type: 'string' } },
    async run(connection, values, [id]) {
      const body: Row = { since: required(values.since, 'since') };
      if (typeof values.until === 'string') body.until = values.until;
      const result = (await call(
        connection,
        'key',
        'POST',
        `/api/v1/settings/webhooks/${encodeURIComponent(id!)}/recover`,
        body,
      )) as Row;
      // One call a run: messages that fail again meanwhile are failed again, and a loop would
      // take them once more.
      const more =
        result.more === true ? '; more failed messages wait: run it again once these are sent' : '';
      return { json: result, text: `${result.requeued} failed messages queued for one more attempt${more}` };
    },
  },
  'webhooks attempts': attemptsCommand('webhooks attempts', 'WEBHOOK_ID', '/api/v1/settings/webhooks'),
  'webhooks delete': {
    usage: 'leads webhooks delete WEBHOOK_ID',
    positionals: ['WEBHOOK_ID'],
    async run(connection, _values, [id]) {
      await call(connection, 'key', 'DELETE', `/api/v1/settings/webhooks/${encodeURIComponent(id!)}`);
      return { json: { id, deleted: true }, text: `webhook ${id} deleted` };
    },
  },
  ...distributionCommands({ call, listAll, table, required, wholeNumber, usageError }),
  'distribution attempts': attemptsCommand(
    'distribution attempts',
    'DELIVERY_ID',
    '/api/v1/distribution/deliveries',
  ),
};

/** A JSON option (`--weekly '{"mon":[["09:00","17:00"]]}'`), read before anything is sent. */
function jsonOption(text: string, name: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw usageError(`--${name} is JSON, e.g. '{"mon":[["09:00","17:00"]]}'`);
  }
}

/** The numeric and optional settings of a calendar given on the command line. */
function calendarBody(values: Record<string, string | boolean | undefined>): Row {
  const body: Row = {};
  for (const option of ['slot-minutes', 'buffer-minutes', 'min-notice-minutes', 'horizon-days', 'capacity']) {
    const value = values[option];
    if (typeof value === 'string') body[option.replaceAll('-', '_')] = wholeNumber(value, option);
  }
  if (typeof values.exceptions === 'string') body.exceptions = jsonOption(values.exceptions, 'exceptions');
  if (values.default === true) body.default = true;
  return body;
}

function calendarLine(calendar: Row): string {
  return `calendar ${calendar.id} ${calendar.name} (${calendar.time_zone}, ${calendar.slot_minutes} min${calendar.default ? ', default' : ''})`;
}

async function switchAutomation(connection: Connection, id: string, enabled: boolean) {
  const automation = (await call(
    connection,
    'key',
    'PATCH',
    `/api/v1/settings/automations/${encodeURIComponent(id)}`,
    { enabled },
  )) as Row;
  return { json: automation, text: `automation ${id} ${enabled ? 'enabled' : 'disabled'}` };
}

/** The usage lines of one group (`keys`, `sources`, …); empty when there is no such group. */
export function groupUsage(group: string): string[] {
  return Object.entries(HTTP_COMMANDS)
    .filter(([name]) => name.startsWith(`${group} `))
    .map(([, spec]) => spec.usage);
}

/**
 * Options of every client command. Of the two credentials a command takes only its own
 * (checkOptionTokens); the parser knows both so that the other one gets a message of its own.
 */
const CONNECTION_OPTIONS = {
  url: { type: 'string' },
  key: { type: 'string' },
  'admin-token': { type: 'string' },
  json: { type: 'boolean' },
} as const;
const CREDENTIAL_OPTIONS = {
  key: { option: 'key', variable: 'LEADS_API_KEY', what: 'an API key' },
  admin: { option: 'admin-token', variable: 'LEADS_ADMIN_TOKEN', what: 'the operator token' },
} as const;
/** Options whose value is a comma-separated list: a repeat is most likely meant as a second item. */
const LIST_OPTIONS = new Set(['modules', 'permissions', 'allowed-origins', 'events']);

/**
 * Refuses what parseArgs would let through unnoticed: an option given twice (parseArgs keeps the
 * last value and drops the others; no option of these commands is repeatable) and the
 * credential option of the other kind (the command would never send it).
 */
function checkOptionTokens(tokens: { kind: string; name?: string }[], credential: 'key' | 'admin'): void {
  const seen = new Set<string>();
  for (const token of tokens) {
    if (token.kind !== 'option' || token.name === undefined) continue;
    const name = token.name;
    if (seen.has(name)) {
      const hint = LIST_OPTIONS.has(name)
        ? ` (several values go in one, comma-separated: --${name} a,b)`
        : '';
      throw usageError(`--${name} is given more than once; give it once${hint}`);
    }
    seen.add(name);
    const other = CREDENTIAL_OPTIONS[credential === 'key' ? 'admin' : 'key'];
    if (name === other.option) {
      const own = CREDENTIAL_OPTIONS[credential];
      throw usageError(
        `--${name} is not used by this command: it authenticates with ${own.what} (--${own.option} or ${own.variable})`,
      );
    }
  }
}

/** Runs `leads <group> <action> …`; returns the exit code. */
export async function runHttpCommand(name: string, args: string[], io: CliIo): Promise<number> {
  const spec = HTTP_COMMANDS[name];
  if (!spec) return EXIT_USAGE;
  if (args.includes('--help') || args.includes('-h')) {
    io.out(`usage: ${spec.usage}\n`);
    return 0;
  }
  const credential = spec.credential ?? 'key';
  let json = false;
  try {
    const { values, positionals, tokens } = parseArgs({
      args,
      options: { ...CONNECTION_OPTIONS, ...spec.options },
      allowPositionals: true,
      strict: true,
      tokens: true,
    });
    json = values.json === true;
    checkOptionTokens(tokens, credential);
    const expected = spec.positionals ?? [];
    if (positionals.length < expected.length) throw usageError(`${expected[positionals.length]} is required`);
    if (positionals.length > expected.length) {
      throw usageError(`unexpected argument "${positionals[expected.length]}"`);
    }
    // Only the command's own credential is handed on; the environment may hold both.
    const connection: Connection = {
      url: (values.url as string | undefined) ?? io.env.LEADS_URL ?? 'http://127.0.0.1:3000',
      key: credential === 'key' ? ((values.key as string | undefined) ?? io.env.LEADS_API_KEY) : undefined,
      adminToken:
        credential === 'admin'
          ? ((values['admin-token'] as string | undefined) ?? io.env.LEADS_ADMIN_TOKEN)
          : undefined,
    };
    const result = await spec.run(
      connection,
      values as Record<string, string | boolean | undefined>,
      positionals,
    );
    io.out(json ? `${JSON.stringify(result.json, null, 2)}\n` : `${result.text}\n`);
    return 0;
  } catch (error) {
    if ((error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      io.err(`leads ${name}: ${(error as Error).message}\nusage: ${spec.usage}\n`);
      return EXIT_USAGE;
    }
    if (!(error instanceof CliError)) throw error;
    // With --json a script gets the service's error answer on stdout, as it gets answers.
    if (json && error.answer !== undefined && error.answer !== null) {
      io.out(`${JSON.stringify(error.answer, null, 2)}\n`);
    }
    const usage = error.exitCode === EXIT_USAGE ? `\nusage: ${spec.usage}` : '';
    io.err(`leads ${name}: ${error.message}${usage}\n`);
    return error.exitCode;
  }
}

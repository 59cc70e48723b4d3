import fs from 'node:fs/promises';
import { parseArgs } from 'node:util';

/** Thin clients of the operator and settings APIs (decisions §2): each command is one or a few calls. */

export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  env: Record<string, string | undefined>;
}

interface Connection {
  url: string;
  key: string | undefined;
  adminToken: string | undefined;
  json: boolean;
}

class CliError extends Error {}

async function call(
  connection: Connection,
  credential: 'key' | 'admin',
  method: string,
  path: string,
  body?: unknown,
): Promise<unknown> {
  const secret = credential === 'admin' ? connection.adminToken : connection.key;
  if (!secret) {
    throw new CliError(
      credential === 'admin'
        ? 'this command needs the operator token: --admin-token or LEADS_ADMIN_TOKEN'
        : 'this command needs an API key: --key or LEADS_API_KEY',
    );
  }
  let response: Response;
  try {
    response = await fetch(new URL(path, connection.url), {
      method,
      headers: {
        authorization: `Bearer ${secret}`,
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (error) {
    throw new CliError(`cannot reach ${connection.url}: ${(error as Error).message}`);
  }
  const text = await response.text();
  const parsed: unknown = text === '' ? null : JSON.parse(text);
  if (!response.ok) {
    const code = (parsed as { error?: string; message?: string } | null)?.error ?? `http_${response.status}`;
    const details = (parsed as { details?: { key: string; message: string }[] } | null)?.details;
    const extra = details?.map((d) => `\n  ${d.key}: ${d.message}`).join('') ?? '';
    throw new CliError(`${method} ${path} failed: ${response.status} ${code}${extra}`);
  }
  return parsed;
}

type Row = Record<string, unknown>;

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

interface CommandSpec {
  usage: string;
  options?: Record<string, { type: 'string' | 'boolean' }>;
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
  if (typeof value !== 'string' || value === '') throw new CliError(`--${name} is required`);
  return value;
}

function positional(positionals: string[], name: string): string {
  const value = positionals[0];
  if (!value) throw new CliError(`${name} is required`);
  return value;
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
  do {
    const page = (await call(
      connection,
      credential,
      'GET',
      `${path}?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    )) as Record<string, unknown>;
    rows.push(...((page[field] as Row[]) ?? []));
    cursor = (page.next_cursor as string | null) ?? null;
  } while (cursor);
  return rows;
}

export const HTTP_COMMANDS: Record<string, CommandSpec> = {
  'accounts create': {
    usage: 'leads accounts create --name NAME [--modules crm,distribution,booking] [--rate-limit N]',
    options: { name: { type: 'string' }, modules: { type: 'string' }, 'rate-limit': { type: 'string' } },
    async run(connection, values) {
      const body: Row = { name: required(values.name, 'name') };
      if (values.modules !== undefined) body.modules = list(values.modules);
      if (values['rate-limit'] !== undefined) body.rate_limit_per_minute = Number(values['rate-limit']);
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
    async run(connection) {
      const rows = await listAll(connection, 'admin', '/admin/v1/accounts', 'accounts');
      return {
        json: { accounts: rows },
        text: table(rows, ['id', 'name', 'modules', 'rate_limit_per_minute']),
      };
    },
  },
  'keys create': {
    usage: 'leads keys create --name NAME [--strict] [--permissions records:read,records:write,…]',
    options: { name: { type: 'string' }, strict: { type: 'boolean' }, permissions: { type: 'string' } },
    async run(connection, values) {
      const body: Row = { name: required(values.name, 'name'), strict: values.strict === true };
      if (values.permissions !== undefined) body.permissions = list(values.permissions);
      const key = (await call(connection, 'key', 'POST', '/api/v1/settings/api-keys', body)) as Row;
      return { json: key, text: `key ${key.id} "${key.name}"\nvalue (shown once): ${key.key}` };
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
    async run(connection, _values, positionals) {
      const id = positional(positionals, 'KEY_ID');
      await call(connection, 'key', 'DELETE', `/api/v1/settings/api-keys/${encodeURIComponent(id)}`);
      return { json: { id, revoked: true }, text: `key ${id} revoked` };
    },
  },
  'sources create': {
    usage: 'leads sources create --name NAME',
    options: { name: { type: 'string' } },
    async run(connection, values) {
      const source = (await call(connection, 'key', 'POST', '/api/v1/settings/sources', {
        name: required(values.name, 'name'),
      })) as Row;
      return {
        json: source,
        text: `source ${source.id} "${source.name}"\ntoken (shown once): ${source.token}`,
      };
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
    async run(connection, _values, positionals) {
      const id = positional(positionals, 'SOURCE_ID');
      const result = (await call(
        connection,
        'key',
        'POST',
        `/api/v1/settings/sources/${encodeURIComponent(id)}/token`,
      )) as Row;
      return { json: result, text: `new token (shown once; the old one no longer works): ${result.token}` };
    },
  },
  'sources revoke': {
    usage: 'leads sources revoke SOURCE_ID',
    async run(connection, _values, positionals) {
      const id = positional(positionals, 'SOURCE_ID');
      await call(connection, 'key', 'DELETE', `/api/v1/settings/sources/${encodeURIComponent(id)}/token`);
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
    async run(connection, _values, positionals) {
      const file = positional(positionals, 'FILE');
      let parsed: unknown;
      try {
        parsed = JSON.parse(await fs.readFile(file, 'utf8'));
      } catch (error) {
        throw new CliError(`cannot read ${file}: ${(error as Error).message}`);
      }
      const definitions = (Array.isArray(parsed) ? parsed : [parsed]) as Row[];
      const applied: unknown[] = [];
      for (const definition of definitions) {
        const { key, ...body } = definition;
        if (typeof key !== 'string') throw new CliError('every entity needs a "key"');
        applied.push(
          await call(connection, 'key', 'PUT', `/api/v1/settings/entities/${encodeURIComponent(key)}`, body),
        );
      }
      return {
        json: { entities: applied },
        text: applied.map((e) => `applied ${(e as Row).key}`).join('\n'),
      };
    },
  },
  'users create': {
    usage: 'leads users create --email EMAIL --name NAME',
    options: { email: { type: 'string' }, name: { type: 'string' } },
    async run(connection, values) {
      const user = (await call(connection, 'key', 'POST', '/api/v1/settings/users', {
        email: required(values.email, 'email'),
        name: required(values.name, 'name'),
      })) as Row;
      return { json: user, text: `user ${user.id} ${user.email}` };
    },
  },
};

const CONNECTION_OPTIONS = {
  url: { type: 'string' },
  key: { type: 'string' },
  'admin-token': { type: 'string' },
  json: { type: 'boolean' },
} as const;

/** Runs `leads <group> <action> …`; returns the exit code. */
export async function runHttpCommand(name: string, args: string[], io: CliIo): Promise<number> {
  const spec = HTTP_COMMANDS[name];
  if (!spec) return 2;
  try {
    const { values, positionals } = parseArgs({
      args,
      options: { ...CONNECTION_OPTIONS, ...spec.options },
      allowPositionals: true,
      strict: true,
    });
    const connection: Connection = {
      url: (values.url as string | undefined) ?? io.env.LEADS_URL ?? 'http://127.0.0.1:3000',
      key: (values.key as string | undefined) ?? io.env.LEADS_API_KEY,
      adminToken: (values['admin-token'] as string | undefined) ?? io.env.LEADS_ADMIN_TOKEN,
      json: values.json === true,
    };
    const result = await spec.run(
      connection,
      values as Record<string, string | boolean | undefined>,
      positionals,
    );
    io.out(connection.json ? `${JSON.stringify(result.json, null, 2)}\n` : `${result.text}\n`);
    return 0;
  } catch (error) {
    if (error instanceof CliError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      io.err(`leads ${name}: ${(error as Error).message}\nusage: ${spec.usage}\n`);
      return 1;
    }
    throw error;
  }
}

import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase, TEST_DATABASES } from '../helpers/databases.ts';
import { LEAD_ENTITY } from '../helpers/fixtures.ts';
import {
  freePort,
  LEADS_BIN,
  NODE_BIN,
  type ServerProcess,
  startServerProcess,
} from '../helpers/server-process.ts';
import { startReceiver } from '../outbound/receiver.ts';

const run = promisify(execFile);
const ADMIN_TOKEN = 'adm_cli_test_operator_token_00000000';

/** Runs `leads …` to its end (30 s at most) with exactly the given LEADS_* variables. */
async function leads(args: string[], env: Record<string, string> = {}) {
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('LEADS_')),
  );
  try {
    const { stdout, stderr } = await run(NODE_BIN, [LEADS_BIN, ...args], {
      env: { ...inherited, ...env },
      timeout: 30_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return {
      code: typeof failed.code === 'number' ? failed.code : -1,
      stdout: failed.stdout ?? '',
      stderr: failed.stderr ?? '',
    };
  }
}

/** Intake through a source token, which travels in the path and needs no Authorization header. */
async function intakeWithSourceToken(baseUrl: string, token: string, email: string) {
  const response = await fetch(`${baseUrl}/api/v1/in/${token}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ entity: 'lead', fields: { email } }),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: response.status, body: (await response.json()) as any };
}

// Every command the issue names; the help must list each of them.
const COMMANDS = [
  'serve',
  'worker',
  'migrate',
  'accounts create',
  'accounts list',
  'accounts key',
  'keys create',
  'keys list',
  'keys revoke',
  'sources create',
  'sources list',
  'sources rotate',
  'sources revoke',
  'sources get',
  'sources update',
  'entities list',
  'entities apply',
  'users create',
  'users list',
  'users update',
  'users remove',
  'automations create',
  'automations list',
  'automations enable',
  'automations disable',
  'automations attempts',
  'automations delete',
  'webhooks create',
  'webhooks list',
  'webhooks test',
  'webhooks recover',
  'webhooks attempts',
  'webhooks delete',
  'partners list',
  'partners create',
  'partners show',
  'partners update',
  'partners retire',
  'distribution show',
  'distribution set',
  'distribution participations add',
  'distribution participations update',
  'distribution participations remove',
  'distribution rules set',
  'distribution start',
  'distribution run',
  'distribution deliveries',
  'distribution attempts',
  'distribution return',
  'distribution participations test',
  'distribution return-reasons add',
  'distribution return-reasons list',
  'distribution return-reasons remove',
  'calendars create',
  'calendars update',
  'calendars list',
  'calendars delete',
  'appointments list',
  'appointments cancel',
];

describe('the leads command line, without a service', () => {
  describe('happy path', () => {
    it('lists every command in --help, and each client command explains itself', async () => {
      const help = await leads(['--help']);
      expect(help.code).toBe(0);
      for (const command of COMMANDS)
        expect(help.stdout).toMatch(new RegExp(`^\\s+(leads )?${command}\\b`, 'm'));
      for (const option of ['--url', '--key', '--admin-token', '--json'])
        expect(help.stdout).toContain(option);

      const one = await leads(['accounts', 'create', '--help']);
      expect(one).toMatchObject({ code: 0, stderr: '' });
      expect(one.stdout).toContain('--name NAME');
      expect((await leads(['migrate', '--help'])).code).toBe(0);

      // A group explains itself with its actions, as a command does.
      for (const [args, actions] of [
        [
          ['keys', '--help'],
          ['leads keys create --name NAME', 'leads keys list', 'leads keys revoke KEY_ID'],
        ],
        [
          ['accounts', '-h'],
          ['leads accounts create', 'leads accounts list', 'leads accounts key ACCOUNT_ID'],
        ],
        [['distribution', 'participations', '--help'], ['leads distribution participations add ENTITY']],
      ] as const) {
        const group = await leads([...args]);
        expect({ args, code: group.code, stderr: group.stderr }).toEqual({ args, code: 0, stderr: '' });
        expect(group.stdout).toMatch(/^usage:\n/);
        for (const action of actions) expect(group.stdout).toContain(action);
      }
      expect((await leads(['distribution', 'participations', '--help'])).stdout).not.toContain('rules set');
      expect((await leads(['--version'])).stdout).toMatch(/^leads \d+\.\d+\.\d+\n$/);
    });

    it('`leads help WORDS` prints what `leads WORDS --help` prints, for a group or a command', async () => {
      for (const words of [
        ['keys'],
        ['distribution', 'participations'],
        ['keys', 'create'],
        ['distribution', 'rules', 'set'],
        ['serve'],
      ]) {
        const asked = await leads([...words, '--help']);
        expect(asked.code).toBe(0);
        for (const help of ['help', '--help', '-h']) {
          const viaHelp = await leads([help, ...words]);
          expect({ words, help, ...viaHelp }).toEqual({ words, help, ...asked });
        }
      }
    });
  });

  describe('errors', () => {
    it('refuses a wrong command line with exit code 2 and says what is wrong', async () => {
      const unknown = await leads(['frobnicate']);
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toContain('unknown command "frobnicate"');
      const noAction = await leads(['keys']);
      expect(noAction.code).toBe(2);
      expect(noAction.stderr).toContain('leads keys revoke KEY_ID');
      const wrongAction = await leads(['keys', '--colour']);
      expect(wrongAction.code).toBe(2);
      expect(wrongAction.stderr).toContain('leads keys has no action "--colour"');
      const cases: [string[], string][] = [
        [['keys', 'create', '--key', 'lk_x'], '--name is required'],
        [['keys', 'revoke', '--key', 'lk_x'], 'KEY_ID is required'],
        [['accounts', 'key', '--admin-token', 'a'], 'ACCOUNT_ID is required'],
        [['keys', 'revoke', 'a', 'b', '--key', 'lk_x'], 'unexpected argument "b"'],
        [['keys', 'list', '--key', 'lk_x', '--colour'], "Unknown option '--colour'"],
        [['accounts', 'create', '--name', 'A', '--rate-limit', '1.5', '--admin-token', 'a'], 'whole number'],
        [['keys', 'list'], '--key or LEADS_API_KEY'],
        [['accounts', 'list'], '--admin-token or LEADS_ADMIN_TOKEN'],
        [['keys', 'list', '--key', 'lk_x', '--url', 'ftp://127.0.0.1'], 'http:// or https://'],
        [['serve', '--port', '4000'], 'settings come from the environment'],
      ];
      for (const [args, message] of cases) {
        const refused = await leads(args);
        expect({ args, code: refused.code }).toEqual({ args, code: 2 });
        expect(refused.stderr).toContain(message);
      }
      const badSetting = await leads(['migrate'], { LEADS_RUN_WORKERS: 'perhaps' });
      expect(badSetting.code).toBe(2);
      expect(badSetting.stderr).toContain('LEADS_RUN_WORKERS must be true or false');
    });

    it('reads an entities file whole before sending anything, and refuses a malformed one', async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'leads-cli-file-'));
      try {
        const port = await freePort();
        const url = `http://127.0.0.1:${port}`;
        const notJson = path.join(dir, 'broken.json');
        await writeFile(notJson, '{"key": "lead",');
        const withoutKey = path.join(dir, 'no-key.json');
        await writeFile(
          withoutKey,
          JSON.stringify([{ key: 'lead', name: 'Lead', fields: [] }, { name: 'X' }]),
        );
        // Nothing listens at `url`: a command that sent a request would fail with "cannot reach".
        for (const [file, message] of [
          [notJson, 'cannot read'],
          [withoutKey, 'entity 2 of'],
          [path.join(dir, 'missing.json'), 'ENOENT'],
        ] as const) {
          const refused = await leads(['entities', 'apply', file, '--url', url, '--key', 'lk_x']);
          expect(refused.code).toBe(2);
          expect(refused.stderr).toContain(message);
          expect(refused.stderr).not.toContain('cannot reach');
        }
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });

    it('refuses a --permissions that names no permission before sending anything', async () => {
      // Nothing listens at `url`: a command that sent a request would fail with "cannot reach".
      const url = `http://127.0.0.1:${await freePort()}`;
      for (const args of [
        ['keys', 'create', '--name', 'Nothing', '--permissions', '', '--key', 'lk_x'],
        ['keys', 'create', '--name', 'Nothing', '--permissions', '  ', '--key', 'lk_x'],
        ['keys', 'create', '--name', 'Nothing', '--permissions', ' , ,', '--key', 'lk_x'],
        ['accounts', 'key', '00000000-0000-4000-8000-000000000000', '--permissions=', '--admin-token', 'a'],
      ]) {
        const refused = await leads([...args, '--url', url]);
        expect({ args, code: refused.code }).toEqual({ args, code: 2 });
        expect(refused.stderr).toContain('--permissions names no permission');
        expect(refused.stderr).not.toContain('cannot reach');
        expect(refused.stdout).toBe('');
      }
    });

    it('refuses an option given twice, naming it, before sending anything', async () => {
      // Nothing listens at `url`: a command that sent a request would fail with "cannot reach".
      const url = `http://127.0.0.1:${await freePort()}`;
      const key = ['--key', 'lk_x'];
      const admin = ['--admin-token', 'a'];
      for (const [args, option] of [
        [
          [
            'keys',
            'create',
            '--name',
            'x',
            '--permissions',
            'records:read',
            '--permissions',
            'settings',
            ...key,
          ],
          '--permissions',
        ],
        [
          ['accounts', 'create', '--name', 'X', '--rate-limit', '10', '--rate-limit=20', ...admin],
          '--rate-limit',
        ],
        [
          ['accounts', 'create', '--name', 'X', '--modules', 'crm', '--modules', 'booking', ...admin],
          '--modules',
        ],
        [['sources', 'update', 'S', '--name', 'A', '--name', 'B', ...key], '--name'],
        [['keys', 'create', '--name', 'x', '--strict', '--strict', ...key], '--strict'],
        [['keys', 'list', '--key', 'lk_a', ...key], '--key'],
        [['accounts', 'list', '--admin-token', 'b', ...admin], '--admin-token'],
        [['keys', 'list', '--json', '--json', ...key], '--json'],
        [['keys', 'list', '--url', url, ...key], '--url'],
      ] as const) {
        const refused = await leads([...args, '--url', url]);
        expect({ args, code: refused.code }).toEqual({ args, code: 2 });
        expect(refused.stderr).toContain(`${option} is given more than once`);
        expect(refused.stderr).not.toContain('cannot reach');
        expect(refused.stdout).toBe('');
      }
      // A list option says how to give several values.
      const twice = await leads([
        'keys',
        'create',
        '--name',
        'x',
        '--permissions',
        'a',
        '--permissions',
        'b',
        ...key,
        '--url',
        url,
      ]);
      expect(twice.stderr).toContain('comma-separated: --permissions a,b');
    });

    it('refuses the credential option of the other kind: operator commands take no --key, the others no --admin-token', async () => {
      const url = `http://127.0.0.1:${await freePort()}`;
      for (const [args, option, own] of [
        [
          ['accounts', 'create', '--name', 'X', '--key', 'foo'],
          '--key',
          '--admin-token or LEADS_ADMIN_TOKEN',
        ],
        [
          ['accounts', 'list', '--key', 'foo', '--admin-token', 'a'],
          '--key',
          '--admin-token or LEADS_ADMIN_TOKEN',
        ],
        [['accounts', 'key', 'A', '--key', 'foo'], '--key', '--admin-token or LEADS_ADMIN_TOKEN'],
        [['keys', 'list', '--admin-token', 'a', '--key', 'lk_x'], '--admin-token', '--key or LEADS_API_KEY'],
        [['keys', 'create', '--name', 'x', '--admin-token', 'a'], '--admin-token', '--key or LEADS_API_KEY'],
        [
          ['distribution', 'rules', 'set', 'lead', '--rules', '[]', '--admin-token', 'a'],
          '--admin-token',
          '--key or LEADS_API_KEY',
        ],
      ] as const) {
        const refused = await leads([...args, '--url', url], {
          LEADS_API_KEY: 'lk_x',
          LEADS_ADMIN_TOKEN: 'a',
        });
        expect({ args, code: refused.code }).toEqual({ args, code: 2 });
        expect(refused.stderr).toContain(`${option} is not used by this command`);
        expect(refused.stderr).toContain(own);
        expect(refused.stderr).not.toContain('cannot reach');
      }
    });

    it('refuses words after --version, and help words that name no command or group', async () => {
      for (const [args, message] of [
        [['--version', 'extra'], 'leads --version: unexpected argument "extra"'],
        [['-v', 'extra'], 'leads -v: unexpected argument "extra"'],
        [['help', 'keys', 'extra'], 'no command or group "keys extra"'],
        [['help', 'keys', 'create', 'extra'], 'no command or group "keys create extra"'],
        [['--help', 'frobnicate'], 'no command or group "frobnicate"'],
        [['help', 'keys', '--json'], 'no command or group "keys --json"'],
      ] as const) {
        const refused = await leads([...args]);
        expect({ args, code: refused.code }).toEqual({ args, code: 2 });
        expect(refused.stderr).toContain(message);
        expect(refused.stdout).toBe('');
      }
    });

    it('refuses every update command with nothing to change, before sending anything', async () => {
      const url = `http://127.0.0.1:${await freePort()}`;
      for (const args of [
        ['users', 'update', 'U'],
        ['sources', 'update', 'S'],
        ['calendars', 'update', 'C'],
        ['partners', 'update', 'P'],
        ['distribution', 'participations', 'update', 'P'],
      ]) {
        const refused = await leads([...args, '--url', url, '--key', 'lk_x']);
        expect({ args, code: refused.code }).toEqual({ args, code: 2 });
        expect(refused.stderr).toContain('name at least one option to change');
        expect(refused.stderr).not.toContain('cannot reach');
      }
    });

    it('fails with exit code 1 and one line when the service cannot be reached or is not Leadline', async () => {
      const closed = await leads([
        'keys',
        'list',
        '--url',
        `http://127.0.0.1:${await freePort()}`,
        '--key',
        'lk_x',
      ]);
      expect(closed.code).toBe(1);
      expect(closed.stderr).toMatch(/cannot reach http:\/\/127\.0\.0\.1:\d+: ECONNREFUSED/);

      // Some other web server at the given address.
      const other = http.createServer((_incoming, outgoing) => {
        outgoing.writeHead(200, { 'content-type': 'text/html' });
        outgoing.end('<html>hello</html>');
      });
      await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
      try {
        const { port } = other.address() as net.AddressInfo;
        const wrong = await leads(['keys', 'list', '--url', `http://127.0.0.1:${port}`, '--key', 'lk_x']);
        expect(wrong.code).toBe(1);
        expect(wrong.stderr).toContain('is not JSON');
        expect(wrong.stderr).not.toMatch(/\n\s+at /);
      } finally {
        other.closeAllConnections();
        await new Promise((resolve) => other.close(resolve));
      }
    });
  });
});

describe.runIf(TEST_DATABASES.includes('postgres'))('the leads command against a running service', () => {
  let server: ServerProcess;
  let drop: () => Promise<void>;
  let dir: string;
  let apiKey: string;

  /** `leads …` against the test's service, with its operator token and the account's key. */
  const client = (...args: string[]) =>
    leads(args, { LEADS_URL: server.url, LEADS_ADMIN_TOKEN: ADMIN_TOKEN, LEADS_API_KEY: apiKey ?? '' });

  beforeAll(async () => {
    const database = await createPostgresDatabase();
    drop = database.drop;
    dir = await mkdtemp(path.join(os.tmpdir(), 'leads-cli-'));
    server = await startServerProcess({
      DATABASE_URL: database.url,
      LEADS_ADMIN_TOKEN: ADMIN_TOKEN,
      LEADS_RUN_WORKERS: 'false',
      // `webhooks test` sends to a receiver of this test on 127.0.0.1.
      LEADS_FETCH_ALLOW_PRIVATE: 'true',
    });
  }, 60_000);
  afterAll(async () => {
    server?.kill('SIGTERM');
    await server?.exited;
    await drop?.();
    await rm(dir, { recursive: true, force: true });
  });

  describe('happy path', () => {
    it('creates an account with the operator token: --json prints the answer, text the key', async () => {
      const created = await client('accounts', 'create', '--name', 'Cli Co', '--modules', 'crm', '--json');
      expect(created.code).toBe(0);
      const account = JSON.parse(created.stdout);
      expect(account).toMatchObject({
        name: 'Cli Co',
        modules: ['crm'],
        api_key: { key: expect.any(String) },
      });
      apiKey = account.api_key.key;

      const asText = await client('accounts', 'create', '--name', 'Text Co', '--rate-limit', '60');
      expect(asText.code).toBe(0);
      const printedKey = /API key \(shown once\): (lk_\S+)/.exec(asText.stdout)?.[1];
      expect(printedKey).toBeDefined();
      expect((await leads(['keys', 'list', '--url', server.url, '--key', printedKey!])).code).toBe(0);

      const listed = await client('accounts', 'list', '--json');
      const accounts = JSON.parse(listed.stdout).accounts as {
        name: string;
        rate_limit_per_minute: number;
      }[];
      expect(accounts.map((a) => a.name).sort()).toEqual(['Cli Co', 'Text Co']);
      expect(accounts.find((a) => a.name === 'Text Co')?.rate_limit_per_minute).toBe(60);
      expect((await client('accounts', 'list')).stdout).toMatch(/^id\s+name\s+modules/);
    });

    it('creates, lists and revokes keys', async () => {
      const key = JSON.parse((await client('keys', 'create', '--name', 'ci', '--strict', '--json')).stdout);
      expect(key).toMatchObject({ name: 'ci', strict: true, key: expect.stringMatching(/^lk_/) });
      const narrow = await client(
        'keys',
        'create',
        '--name',
        'reader',
        '--permissions',
        'records:read',
        '--json',
      );
      expect(JSON.parse(narrow.stdout).permissions).toEqual(['records:read']);
      const listed = await client('keys', 'list');
      expect(listed.stdout).toContain(key.id);
      expect(listed.stdout).toContain('reader');

      const revoked = await client('keys', 'revoke', key.id);
      expect(revoked).toMatchObject({ code: 0, stdout: `key ${key.id} revoked\n` });
      const after = JSON.parse((await client('keys', 'list', '--json')).stdout);
      expect(after.api_keys.map((k: { id: string }) => k.id)).not.toContain(key.id);
    });

    it('gives an account whose keys are all revoked a new key with the operator token', async () => {
      const account = JSON.parse(
        (await client('accounts', 'create', '--name', 'Locked Co', '--json')).stdout,
      );
      const asAccount = (key: string, ...args: string[]) =>
        leads(args, { LEADS_URL: server.url, LEADS_API_KEY: key });
      expect((await asAccount(account.api_key.key, 'keys', 'revoke', account.api_key.id)).code).toBe(0);
      expect((await asAccount(account.api_key.key, 'keys', 'list')).code).toBe(1);

      const issued = await client('accounts', 'key', account.id, '--json');
      expect(issued.code).toBe(0);
      const key = JSON.parse(issued.stdout);
      expect(key).toMatchObject({
        name: 'Operator key',
        strict: false,
        manages_users: true,
        key: expect.stringMatching(/^lk_/),
      });
      const listed = JSON.parse((await asAccount(key.key, 'keys', 'list', '--json')).stdout);
      expect(listed.api_keys.map((k: { id: string }) => k.id)).toEqual([key.id]);

      const asText = await client(
        'accounts',
        'key',
        account.id,
        '--name',
        'Reader',
        '--permissions',
        'records:read',
        '--strict',
      );
      expect(asText.code).toBe(0);
      const value = /^key [0-9a-f-]{36} "Reader"\nvalue \(shown once\): (lk_\S+)\n$/.exec(asText.stdout)?.[1];
      expect(value).toBeDefined();
      const after = JSON.parse((await asAccount(key.key, 'keys', 'list', '--json')).stdout);
      expect(after.api_keys.find((k: { name: string }) => k.name === 'Reader')).toMatchObject({
        permissions: ['records:read'],
        strict: true,
        prefix: value!.slice(0, 10),
      });
    });

    it('applies an entities file and lists the entities', async () => {
      const file = path.join(dir, 'entities.json');
      await writeFile(
        file,
        JSON.stringify([
          { key: 'lead', ...LEAD_ENTITY, duplicate_rule: { match: ['email'], action: 'update' } },
          { key: 'deal', name: 'Deal', fields: [{ key: 'title', label: 'Title', type: 'text' }] },
        ]),
      );
      const applied = await client('entities', 'apply', file);
      expect(applied).toMatchObject({ code: 0, stdout: 'applied lead\napplied deal\n' });
      // Applying again replaces, it does not duplicate.
      expect((await client('entities', 'apply', file)).code).toBe(0);
      const listed = JSON.parse((await client('entities', 'list', '--json')).stdout);
      expect(listed.entities.map((e: { key: string }) => e.key).sort()).toEqual(['deal', 'lead']);
      expect((await client('entities', 'list')).stdout).toMatch(/deal\s+Deal\s+false\s+1/);

      // A type change the stored values may not fit: the service's warning, under the entity.
      const deal = await fetch(`${server.url}/api/v1/records`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ entity: 'deal', fields: { title: 'Big one' } }),
      });
      expect(deal.status).toBe(201);
      const single = path.join(dir, 'single.json');
      await writeFile(
        single,
        JSON.stringify({
          key: 'deal',
          name: 'Deal 2',
          fields: [{ key: 'title', label: 'Title', type: 'number' }],
        }),
      );
      expect(await client('entities', 'apply', single)).toMatchObject({
        code: 0,
        stdout:
          'applied deal\n  warning: 1 record holds a value of title taken in as text; kept as it is, not converted to number\n',
      });
      expect((await client('entities', 'apply', single, '--json')).code).toBe(0);
      const renamed = JSON.parse((await client('entities', 'list', '--json')).stdout);
      expect(renamed.entities.find((e: { key: string }) => e.key === 'deal').name).toBe('Deal 2');
    });

    it('creates a source whose token takes in records, rotates it, and revokes it', async () => {
      const source = JSON.parse((await client('sources', 'create', '--name', 'Web', '--json')).stdout);
      expect(source.token).toMatch(/^st_/);
      const intake = (token: string, email: string) => intakeWithSourceToken(server.url, token, email);
      expect((await intake(source.token, 'one@cli.test')).status).toBe(201);

      const rotated = JSON.parse((await client('sources', 'rotate', source.id, '--json')).stdout);
      expect(rotated.token).toMatch(/^st_/);
      expect(rotated.token).not.toBe(source.token);
      expect((await intake(source.token, 'two@cli.test')).status).toBe(401);
      expect((await intake(rotated.token, 'two@cli.test')).status).toBe(201);
      expect((await client('sources', 'list')).stdout).toMatch(/Web\s+st_/);

      expect((await client('sources', 'revoke', source.id)).code).toBe(0);
      expect((await intake(rotated.token, 'three@cli.test')).status).toBe(401);
    });

    it('sets, reads and changes a source’s website-form settings', async () => {
      const created = await client(
        'sources',
        'create',
        '--name',
        'Form',
        '--success-url',
        'https://www.example.com/danke',
        '--allowed-origins',
        'https://www.example.com, http://127.0.0.1:8080',
        '--rate-limit',
        '30',
        '--json',
      );
      expect(created.code).toBe(0);
      const source = JSON.parse(created.stdout);
      expect(source).toMatchObject({
        success_url: 'https://www.example.com/danke',
        allowed_origins: ['https://www.example.com', 'http://127.0.0.1:8080'],
        honeypot_field: '_hp',
        rate_limit_per_minute: 30,
      });
      const updated = await client(
        'sources',
        'update',
        source.id,
        '--success-url',
        '',
        '--honeypot-field',
        'website',
        '--error-url',
        'https://www.example.com/fehler',
      );
      expect(updated.code).toBe(0);
      expect(updated.stdout).toContain('honeypot_field: website');
      const read = JSON.parse((await client('sources', 'get', source.id, '--json')).stdout);
      expect(read).toMatchObject({
        success_url: null,
        error_url: 'https://www.example.com/fehler',
        honeypot_field: 'website',
        rate_limit_per_minute: 30,
        allowed_origins: ['https://www.example.com', 'http://127.0.0.1:8080'],
      });
      const refused = await client(
        'sources',
        'update',
        source.id,
        '--allowed-origins',
        'https://a.example/path',
      );
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('allowed_origins.0');
    });

    it('creates and lists users', async () => {
      const user = await client('users', 'create', '--email', 'rep@cli.test', '--name', 'Rep');
      expect(user.code).toBe(0);
      expect(user.stdout).toMatch(/^user [0-9a-f-]{36} rep@cli\.test\n$/);
      expect((await client('users', 'list')).stdout).toMatch(/rep@cli\.test\s+Rep\s+(owner|member)/);
      // An invitation is written for the workers to send (they are off here: the message waits).
      const invited = await client(
        'users',
        'create',
        '--email',
        'new@cli.test',
        '--name',
        'New',
        '--invite',
        '--language',
        'de',
      );
      expect(invited.code).toBe(0);
      expect(invited.stdout).toMatch(
        /^user [0-9a-f-]{36} new@cli\.test \(invited; the link works until \d{4}-\d{2}-\d{2}T/,
      );
      const lonely = await client(
        'users',
        'create',
        '--email',
        'lang@cli.test',
        '--name',
        'L',
        '--language',
        'de',
      );
      expect(lonely.code).toBe(1);
      expect(lonely.stderr).toContain('422 validation_failed');
      const viewer = await client(
        'users',
        'create',
        '--email',
        'viewer@cli.test',
        '--name',
        'V',
        '--role',
        'viewer',
      );
      const id = viewer.stdout.split(' ')[1]!;
      const promoted = await client('users', 'update', id, '--role', 'admin');
      expect(promoted.stdout).toBe(`user ${id} viewer@cli.test admin\n`);
      expect((await client('users', 'remove', id)).stdout).toBe(`removed user ${id}\n`);
      expect((await client('users', 'list')).stdout).not.toContain('viewer@cli.test');
    });

    it('creates, lists, switches and deletes automations', async () => {
      const created = await client(
        'automations',
        'create',
        '--name',
        'Won hook',
        '--entity',
        'lead',
        '--stage',
        'Won',
        '--action',
        '{"type":"webhook","url":"https://hooks.example.com/won"}',
      );
      expect(created).toMatchObject({ code: 0, stderr: '' });
      const id = /^automation ([0-9a-f-]{36}) Won hook on Sales\/Won\n/.exec(created.stdout)?.[1];
      expect(id).toBeDefined();
      expect(created.stdout).toMatch(/secret \(shown once\): whsec_\S+/);
      expect((await client('automations', 'list')).stdout).toMatch(
        /Won hook\s+lead\s+Sales\s+Won\s+webhook\s+true/,
      );
      expect((await client('automations', 'disable', id!)).stdout).toBe(`automation ${id} disabled\n`);
      const listed = JSON.parse((await client('automations', 'list', '--json')).stdout);
      expect(listed.automations).toEqual([expect.objectContaining({ id, enabled: false })]);
      expect((await client('automations', 'enable', id!)).code).toBe(0);
      // Nothing was moved into Won: no message, no attempt (the API tests cover sent ones).
      const attempts = JSON.parse((await client('automations', 'attempts', id!, '--json')).stdout);
      expect(attempts).toEqual({ attempts: [], next_cursor: null });
      expect((await client('automations', 'delete', id!)).stdout).toBe(`automation ${id} deleted\n`);
      const unknown = await client(
        'automations',
        'create',
        '--name',
        'x',
        '--entity',
        'lead',
        '--stage',
        'Lost',
        '--action',
        '{"type":"note","body":"x"}',
      );
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toContain('422 validation_failed');
      const malformed = await client(
        'automations',
        'create',
        '--name',
        'x',
        '--entity',
        'lead',
        '--stage',
        'Won',
        '--action',
        '{type',
      );
      expect(malformed.code).toBe(2);
    });

    it('creates, changes, lists and deletes calendars; lists and cancels appointments', async () => {
      const created = await client(
        'accounts',
        'create',
        '--name',
        'Booking Co',
        '--modules',
        'booking',
        '--json',
      );
      const key = JSON.parse(created.stdout).api_key.key as string;
      const booking = (...args: string[]) => leads(args, { LEADS_URL: server.url, LEADS_API_KEY: key });
      const allDay = JSON.stringify(
        Object.fromEntries(
          ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((day) => [day, [['00:00', '24:00']]]),
        ),
      );
      const calendar = await booking(
        'calendars',
        'create',
        '--name',
        'Advice',
        '--time-zone',
        'Europe/Berlin',
        '--weekly',
        allDay,
        '--slot-minutes',
        '30',
        '--min-notice-minutes',
        '0',
        '--capacity',
        '2',
        '--json',
      );
      expect(calendar.code).toBe(0);
      const { id } = JSON.parse(calendar.stdout);
      expect(JSON.parse(calendar.stdout)).toMatchObject({
        capacity: 2,
        default: true,
        min_notice_minutes: 0,
      });
      const updated = await booking(
        'calendars',
        'update',
        id,
        '--name',
        'Solar advice',
        '--buffer-minutes',
        '0',
      );
      expect(updated.stdout).toBe(`calendar ${id} Solar advice (Europe/Berlin, 30 min, default)\n`);
      expect((await booking('calendars', 'list')).stdout).toContain('Solar advice');
      const wrongJson = await booking(
        'calendars',
        'create',
        '--name',
        'x',
        '--time-zone',
        'UTC',
        '--weekly',
        '{mon',
      );
      expect(wrongJson.code).toBe(2);
      await writeFile(
        path.join(dir, 'booking-entities.json'),
        JSON.stringify({ key: 'lead', ...LEAD_ENTITY }),
      );
      expect((await booking('entities', 'apply', path.join(dir, 'booking-entities.json'))).code).toBe(0);
      const slot = new Date(Math.ceil((Date.now() + 86_400_000) / 1_800_000) * 1_800_000).toISOString();
      const intake = await fetch(`${server.url}/api/v1/records`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          entity: 'lead',
          fields: { email: 'cli@example.com' },
          booking: { starts_at: slot },
        }),
      });
      const appointmentId = ((await intake.json()) as any).booking.appointment_id as string;
      const listed = await booking('appointments', 'list', '--calendar', id, '--json');
      expect(JSON.parse(listed.stdout).appointments.map((a: { id: string }) => a.id)).toEqual([
        appointmentId,
      ]);
      const cancelled = await booking('appointments', 'cancel', appointmentId, '--reason', 'CLI');
      expect(cancelled.stdout).toBe(`appointment ${appointmentId} cancelled\n`);
      const stillBooked = await booking('calendars', 'delete', id);
      expect(stillBooked.stdout).toBe(`calendar ${id} deleted\n`);
    });

    it('creates, lists, tests and deletes webhooks', async () => {
      const receiver = await startReceiver();
      try {
        const created = await client(
          'webhooks',
          'create',
          '--endpoint',
          receiver.url,
          '--events',
          'record.created,note.added',
        );
        expect(created).toMatchObject({ code: 0, stderr: '' });
        const secret = /secret \(shown once\): (whsec_\S+)/.exec(created.stdout)?.[1];
        const id = /^webhook ([0-9a-f-]{36}) /.exec(created.stdout)?.[1];
        expect(secret).toBeDefined();
        receiver.verifyWith(secret!);
        expect((await client('webhooks', 'list')).stdout).toContain(receiver.url);
        receiver.answerNext({ status: 200, body: 'fine' });
        const tested = await client('webhooks', 'test', id!);
        expect(tested).toMatchObject({ code: 0 });
        expect(tested.stdout).toMatch(/^delivered: 200 fine \(\d+ ms\)\n$/);
        expect(receiver.received[0]!.json.type).toBe('webhook.test');
        receiver.answerNext({ status: 500, body: 'down' });
        const failed = await client('webhooks', 'test', id!, '--json');
        expect(failed.code).toBe(1);
        expect(JSON.parse(failed.stdout)).toMatchObject({ delivered: false, status_code: 500 });
        // Both tests' attempts, newest first: the failed one, then the delivered one.
        const attempts = await client('webhooks', 'attempts', id!);
        expect(attempts).toMatchObject({ code: 0, stderr: '' });
        const lines = attempts.stdout.trim().split('\n');
        expect(lines[0]).toMatch(
          /^attempted_at\s+event\s+attempt\s+outcome\s+status_code\s+duration_ms\s+error$/,
        );
        expect(lines.slice(1).map((line) => line.split(/\s+/).slice(1, 5))).toEqual([
          ['webhook.test', '1', 'failed', '500'],
          ['webhook.test', '1', 'delivered', '200'],
        ]);
        const newest = JSON.parse(
          (await client('webhooks', 'attempts', id!, '--limit', '1', '--json')).stdout,
        );
        expect(newest.attempts).toHaveLength(1);
        expect(newest.next_cursor).toEqual(expect.any(String));
        expect((await client('webhooks', 'attempts', id!, '--limit', 'x')).code).toBe(2);
        // Test messages are not resent: nothing failed here to recover.
        const since = new Date(Date.now() - 60_000).toISOString();
        const recovered = await client('webhooks', 'recover', id!, '--since', since);
        expect(recovered).toMatchObject({ code: 0, stderr: '' });
        expect(recovered.stdout).toBe('0 failed messages queued for one more attempt\n');
        expect(
          JSON.parse((await client('webhooks', 'recover', id!, '--since', since, '--json')).stdout),
        ).toEqual({
          requeued: 0,
          more: false,
        });
        expect((await client('webhooks', 'recover', id!)).code).toBe(2);
        const backwards = await client('webhooks', 'recover', id!, '--since', since, '--until', since);
        expect(backwards.code).toBe(1);
        expect(backwards.stderr).toContain('422 validation_failed');
        expect((await client('webhooks', 'delete', id!)).stdout).toBe(`webhook ${id} deleted\n`);
        expect((await client('webhooks', 'list')).stdout).not.toContain(receiver.url);
        const unknown = await client('webhooks', 'create', '--endpoint', receiver.url, '--events', 'nope');
        expect(unknown.code).toBe(1);
        expect(unknown.stderr).toContain('422 validation_failed');
      } finally {
        await receiver.close();
      }
    });

    it('sets up partners and a distribution: participations, rules and return reasons', async () => {
      const account = JSON.parse(
        (await client('accounts', 'create', '--name', 'Dist Co', '--modules', 'distribution', '--json'))
          .stdout,
      );
      const as = (...args: string[]) =>
        leads(args, { LEADS_URL: server.url, LEADS_API_KEY: account.api_key.key });
      const file = path.join(dir, 'dist-entities.json');
      await writeFile(file, JSON.stringify({ key: 'lead', ...LEAD_ENTITY }));
      expect((await as('entities', 'apply', file)).code).toBe(0);

      const created = await as(
        'partners',
        'create',
        '--name',
        'Solar GmbH',
        '--city',
        'Berlin',
        '--country',
        'Germany',
        '--e-invoice',
        'yes',
      );
      expect(created).toMatchObject({ code: 0, stderr: '' });
      const partnerId = /^partner ([0-9a-f-]{36}) "Solar GmbH"\n$/.exec(created.stdout)?.[1];
      expect(partnerId).toBeDefined();
      expect((await as('partners', 'list')).stdout).toMatch(
        /Solar GmbH\s+Berlin\s+DE\s+street,postal_code,email,buyer_reference/,
      );
      expect(
        (
          await as(
            'partners',
            'update',
            partnerId!,
            '--buyer-reference',
            'PO-1',
            '--email',
            'in@solar.example',
          )
        ).stdout,
      ).toBe(`partner ${partnerId} updated\n`);
      const shown = await as('partners', 'show', partnerId!);
      expect(shown.stdout).toContain('buyer_reference: PO-1');
      expect(shown.stdout).toContain('gaps: street, postal_code');
      expect(
        JSON.parse((await as('partners', 'list', '--search', 'solar', '--json')).stdout).partner,
      ).toHaveLength(1);

      const set = await as(
        'distribution',
        'set',
        'lead',
        '--return-deadline-days',
        '7',
        '--redistribute-on-return',
        'yes',
      );
      expect(set.stdout).toMatch(
        /^distribution [0-9a-f-]{36} of lead: enabled, returns within 7 days, redistribute on return: yes\n/,
      );
      const added = await as(
        'distribution',
        'participations',
        'add',
        'lead',
        '--partner',
        partnerId!,
        '--channel',
        'webhook',
        '--address',
        'https://partner.example.com/hook',
        '--price-cents',
        '1500',
        '--caps',
        '{"day":5}',
      );
      expect(added).toMatchObject({ code: 0, stderr: '' });
      const participationId = /^participation ([0-9a-f-]{36}) of Solar GmbH via webhook /.exec(
        added.stdout,
      )?.[1];
      const secret = /secret \(shown once\): (whsec_\S+)/.exec(added.stdout)?.[1];
      expect(participationId).toBeDefined();
      expect(secret).toBeDefined();
      const rotated = await as(
        'distribution',
        'participations',
        'update',
        participationId!,
        '--rotate-secret',
        '--paused',
        'yes',
      );
      const newSecret = /secret \(shown once\): (whsec_\S+)/.exec(rotated.stdout)?.[1];
      expect(newSecret).toBeDefined();
      expect(newSecret).not.toBe(secret);
      const rules = await as(
        'distribution',
        'rules',
        'set',
        'lead',
        '--rules',
        JSON.stringify([
          {
            name: 'Solar',
            filter: [{ field: 'interest', op: 'equals', value: 'Solar' }],
            strategy: 'all',
            participation_ids: [participationId],
          },
        ]),
      );
      expect(rules.stdout).toBe('1 rules set: Solar\n');
      const show = await as('distribution', 'show', 'lead');
      expect(show.stdout).toMatch(
        /Solar GmbH\s+webhook\s+https:\/\/partner\.example\.com\/hook\s+1500 EUR\s+paused/,
      );
      expect(show.stdout).toContain(`1. Solar: all, up to 1, 1 conditions, from ${participationId}`);
      expect(show.stdout).not.toContain(newSecret);

      const reason = await as('distribution', 'return-reasons', 'add', '--name', 'Wrong number');
      const reasonId = /^return reason ([0-9a-f-]{36}) "Wrong number"\n$/.exec(reason.stdout)?.[1];
      expect(reasonId).toBeDefined();
      expect((await as('distribution', 'return-reasons', 'list')).stdout).toMatch(/Wrong number/);
      expect((await as('distribution', 'return-reasons', 'remove', reasonId!)).stdout).toBe(
        `return reason ${reasonId} removed\n`,
      );
      // A participation a rule names stays until the rule no longer names it.
      const named = await as('distribution', 'participations', 'remove', participationId!);
      expect(named.code).toBe(1);
      expect(named.stderr).toContain('409 conflict');
      // The service's sentence names the rule, so that one knows what to change.
      expect(named.stderr).toMatch(/409 conflict: distribution rule ".+" names this participation/);
      expect((await as('distribution', 'rules', 'set', 'lead', '--rules', '[]')).code).toBe(0);
      expect((await as('distribution', 'participations', 'remove', participationId!)).code).toBe(0);
      expect((await as('partners', 'retire', partnerId!)).stdout).toBe(`partner ${partnerId} retired\n`);
      expect((await as('partners', 'list')).stdout).toBe('(none)\n');

      const taken = await as('partners', 'create', '--name', 'solar gmbh');
      expect(taken.code).toBe(1);
      expect(taken.stderr).toContain('409 partner_name_taken');
      const country = await as('partners', 'create', '--name', 'Nowhere', '--country', 'Atlantis');
      expect(country.stderr).toContain('country: ');
      expect((await as('distribution', 'set', 'lead', '--enabled', 'maybe')).code).toBe(2);
      expect((await as('distribution', 'rules', 'set', 'lead', '--rules', '{}')).code).toBe(2);
      // The CRM-only account has no distribution module.
      expect((await client('partners', 'list')).stderr).toContain('403 module_not_enabled');
    });

    it('runs a distribution, lists and returns its delivery, and tests a participation', async () => {
      const receiver = await startReceiver();
      try {
        const account = JSON.parse(
          (await client('accounts', 'create', '--name', 'Run Co', '--modules', 'distribution', '--json'))
            .stdout,
        );
        const as = (...args: string[]) =>
          leads(args, { LEADS_URL: server.url, LEADS_API_KEY: account.api_key.key });
        const file = path.join(dir, 'run-entities.json');
        await writeFile(file, JSON.stringify({ key: 'lead', ...LEAD_ENTITY }));
        expect((await as('entities', 'apply', file)).code).toBe(0);
        const partnerId = /^partner (\S+)/.exec(
          (await as('partners', 'create', '--name', 'Run Partner')).stdout,
        )?.[1];
        expect((await as('distribution', 'set', 'lead')).code).toBe(0);
        const added = await as(
          ...['distribution', 'participations', 'add', 'lead', '--partner', partnerId!],
          ...['--channel', 'webhook', '--address', receiver.url, '--price-cents', '900'],
        );
        const participationId = /^participation (\S+)/.exec(added.stdout)?.[1];
        receiver.verifyWith(/secret \(shown once\): (whsec_\S+)/.exec(added.stdout)![1]!);
        const rule = [{ name: 'Everyone', strategy: 'all', participation_ids: [participationId] }];
        expect((await as('distribution', 'rules', 'set', 'lead', '--rules', JSON.stringify(rule))).code).toBe(
          0,
        );
        const record = await fetch(`${server.url}/api/v1/records`, {
          method: 'POST',
          headers: { authorization: `Bearer ${account.api_key.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ entity: 'lead', fields: { email: 'run@example.com' } }),
        });
        const recordId = ((await record.json()) as { id: string }).id;

        const started = await as('distribution', 'start', recordId);
        expect(started).toMatchObject({ code: 0, stderr: '' });
        expect(started.stdout).toMatch(/^run (\S+): distributed, 1 partners, 900 cents\n/);
        expect(started.stdout).toMatch(/Run Partner\s+webhook\s+900\s+delivered/);
        const runId = /^run (\S+):/.exec(started.stdout)![1]!;
        expect((await as('distribution', 'run', runId)).stdout).toContain(
          `of record ${recordId}: decided (api`,
        );
        const listed = JSON.parse(
          (await as('distribution', 'deliveries', '--status', 'delivered', '--partner', partnerId!, '--json'))
            .stdout,
        );
        expect(listed.deliveries).toHaveLength(1);
        const deliveryId = listed.deliveries[0].id as string;
        expect((await as('distribution', 'deliveries', '--limit', 'x')).code).toBe(2);
        const attempts = await as('distribution', 'attempts', deliveryId);
        expect(attempts.code).toBe(0);
        expect(attempts.stdout).toMatch(/record\.delivered\s+1\s+delivered\s+200/);
        expect((await as('distribution', 'attempts', deliveryId, '--limit', 'x')).code).toBe(2);
        expect((await as('distribution', 'return', deliveryId, '--text', 'wrong number')).stdout).toBe(
          `delivery ${deliveryId} returned\n`,
        );
        const again = await as('distribution', 'return', deliveryId);
        expect(again.code).toBe(1);
        expect(again.stderr).toContain('409 return_not_allowed');
        const tested = await as('distribution', 'participations', 'test', participationId!);
        expect(tested.stdout).toMatch(/^ok: webhook 200 /);
        // The delivery and the test delivery, both signed with the participation's secret.
        expect(receiver.received).toHaveLength(2);
      } finally {
        await receiver.close();
      }
    });
  });

  describe('errors', () => {
    it('prints the error code and exits 1 on an API error; --json adds the error answer', async () => {
      const wrongKey = await leads(['keys', 'list', '--url', server.url, '--key', 'lk_wrong']);
      expect(wrongKey.code).toBe(1);
      expect(wrongKey.stderr).toContain('401 unauthorized');

      const duplicate = await client(
        'users',
        'create',
        '--email',
        'rep@cli.test',
        '--name',
        'Again',
        '--json',
      );
      expect(duplicate.code).toBe(1);
      expect(JSON.parse(duplicate.stdout).error).toBe(duplicate.stderr.match(/failed: \d+ (\w+)/)?.[1]);

      const unknownModule = await client('accounts', 'create', '--name', 'X', '--modules', 'teleport');
      expect(unknownModule.code).toBe(1);
      expect(unknownModule.stderr).toContain('validation_failed');

      const unknownAccount = await client('accounts', 'key', '00000000-0000-4000-8000-000000000000');
      expect(unknownAccount.code).toBe(1);
      expect(unknownAccount.stderr).toContain('404 not_found');
    });

    it('says which entities were applied before one was refused', async () => {
      const file = path.join(dir, 'partly.json');
      await writeFile(
        file,
        JSON.stringify([
          { key: 'note_ok', name: 'Fine', fields: [] },
          { key: 'broken', name: 'Broken', fields: [{ key: 'x', label: 'X', type: 'no_such_type' }] },
        ]),
      );
      const applied = await client('entities', 'apply', file);
      expect(applied.code).toBe(1);
      expect(applied.stderr).toContain('validation_failed');
      expect(applied.stderr).toContain('applied before this failure: note_ok');
    });
  });

  describe('security', () => {
    it('a revoked key stops working at once, and an account key cannot use the operator commands', async () => {
      const key = JSON.parse((await client('keys', 'create', '--name', 'short-lived', '--json')).stdout);
      const withKey = (...args: string[]) => leads(args, { LEADS_URL: server.url, LEADS_API_KEY: key.key });
      expect((await withKey('keys', 'list')).code).toBe(0);
      expect((await client('keys', 'revoke', key.id)).code).toBe(0);
      const refused = await withKey('keys', 'list');
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('401 unauthorized');

      // The key's own account: an account key cannot issue itself another key either.
      const accounts = JSON.parse((await client('accounts', 'list', '--json')).stdout).accounts;
      const own = accounts.find((a: { name: string }) => a.name === 'Cli Co').id;
      for (const args of [
        ['accounts', 'list'],
        ['accounts', 'key', own],
      ]) {
        const notOperator = await leads([...args, '--url', server.url, '--admin-token', apiKey]);
        expect(notOperator.code).toBe(1);
        expect(notOperator.stderr).toContain('401 unauthorized');
      }
    });
  });
});

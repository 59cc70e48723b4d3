import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase, TEST_DATABASES } from '../helpers/databases.ts';
import { LEAD_ENTITY } from '../helpers/fixtures.ts';
import { LEADS_BIN, NODE_BIN, type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

const run = promisify(execFile);
const ADMIN_TOKEN = 'adm_cli_test_operator_token_00000000';

describe.runIf(TEST_DATABASES.includes('postgres'))('the leads command against a running service', () => {
  let server: ServerProcess;
  let drop: () => Promise<void>;
  let dir: string;
  let apiKey: string;

  async function leads(...args: string[]) {
    try {
      const { stdout, stderr } = await run(NODE_BIN, [LEADS_BIN, ...args], {
        env: {
          ...process.env,
          LEADS_URL: server.url,
          LEADS_ADMIN_TOKEN: ADMIN_TOKEN,
          LEADS_API_KEY: apiKey ?? '',
        },
        timeout: 30_000,
      });
      return { code: 0, stdout, stderr };
    } catch (error) {
      const failed = error as { code?: number; stdout?: string; stderr?: string };
      return { code: failed.code ?? 1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
    }
  }

  beforeAll(async () => {
    const database = await createPostgresDatabase();
    drop = database.drop;
    dir = await mkdtemp(path.join(os.tmpdir(), 'leads-cli-'));
    server = await startServerProcess({ DATABASE_URL: database.url, LEADS_ADMIN_TOKEN: ADMIN_TOKEN });
  }, 60_000);
  afterAll(async () => {
    server?.kill('SIGTERM');
    await server?.exited;
    await drop?.();
    await rm(dir, { recursive: true, force: true });
  });

  it('creates an account with the operator token and prints JSON with --json', async () => {
    const created = await leads('accounts', 'create', '--name', 'Cli Co', '--modules', 'crm', '--json');
    expect(created.code).toBe(0);
    const account = JSON.parse(created.stdout);
    expect(account).toMatchObject({ name: 'Cli Co', modules: ['crm'] });
    apiKey = account.api_key.key;
    const listed = await leads('accounts', 'list');
    expect(listed.stdout).toContain('Cli Co');
  });

  it('manages keys, entities, sources and users with the API key', async () => {
    const key = JSON.parse((await leads('keys', 'create', '--name', 'ci', '--strict', '--json')).stdout);
    expect(key).toMatchObject({ name: 'ci', strict: true });
    expect((await leads('keys', 'list')).stdout).toContain('ci');
    expect((await leads('keys', 'revoke', key.id)).code).toBe(0);
    expect((await leads('keys', 'list', '--json')).stdout).not.toContain(key.id);

    const file = path.join(dir, 'entities.json');
    await writeFile(
      file,
      JSON.stringify([
        { key: 'lead', ...LEAD_ENTITY },
        { key: 'deal', name: 'Deal', fields: [] },
      ]),
    );
    const applied = await leads('entities', 'apply', file);
    expect(applied.code).toBe(0);
    expect(applied.stdout).toContain('applied lead');
    expect((await leads('entities', 'list')).stdout).toMatch(/deal/);

    const source = JSON.parse((await leads('sources', 'create', '--name', 'Web', '--json')).stdout);
    expect(source.token).toMatch(/^st_/);
    const rotated = JSON.parse((await leads('sources', 'rotate', source.id, '--json')).stdout);
    expect(rotated.token).not.toBe(source.token);
    expect((await leads('sources', 'list')).stdout).toContain('Web');
    expect((await leads('sources', 'revoke', source.id)).code).toBe(0);

    const user = await leads('users', 'create', '--email', 'rep@cli.test', '--name', 'Rep');
    expect(user.code).toBe(0);
  });

  it('exits non-zero with the error code on an API error or a bad call', async () => {
    const wrongKey = await leads('keys', 'list', '--key', 'lk_wrong');
    expect(wrongKey.code).not.toBe(0);
    expect(wrongKey.stderr).toContain('unauthorized');
    const missing = await leads('keys', 'create');
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain('--name is required');
    const unknown = await leads('frobnicate');
    expect(unknown.code).toBe(2);
  });
});

import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll } from 'vitest';
import { createPostgresDatabase } from '../helpers/databases.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const run = promisify(execFile);

/**
 * Runs a program (an ES module's text) in a child Node process started with `nodeFlags`, in the
 * project's directory, with `root` (the project's file URL) defined before it; returns what it
 * printed. In a child process, since V8's flags are the process's and the test runner's own must
 * not change.
 */
export async function runProgram(program: string, nodeFlags: string[]): Promise<string> {
  const { stdout } = await run(
    process.execPath,
    [
      ...nodeFlags,
      '--input-type=module',
      '-e',
      `const root = ${JSON.stringify(pathToFileURL(`${ROOT}/`).href)};\n${program}`,
    ],
    { cwd: ROOT, timeout: 60_000, maxBuffer: 64 * 1024 * 1024 },
  );
  return stdout;
}

/**
 * A PostgreSQL database of its own for the tests of one `describe`: made before them, dropped
 * after. Returns its URL, read once the database exists.
 */
export function usePostgresDatabase(): () => string {
  let database: Awaited<ReturnType<typeof createPostgresDatabase>> | undefined;
  beforeAll(async () => {
    database = await createPostgresDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });
  return () => {
    if (!database) throw new Error('the database is made before the tests');
    return database.url;
  };
}

/**
 * Program text for `runProgram` that opens the
 * service's runtime on a PostgreSQL database as `leads serve` does, without workers, and closes
 * it again: what the runtime sets up for the process stays.
 */
export function openRuntimeOnPostgres(databaseUrl: string): string {
  return `
const { loadConfig } = await import(root + 'src/config.ts');
const { openRuntime } = await import(root + 'src/start/runtime.ts');
const config = loadConfig({ DATABASE_URL: ${JSON.stringify(databaseUrl)} });
const runtime = await openRuntime(config, { logger: { info() {}, warn() {}, error() {} }, works: false });
await runtime.database.close();
`;
}

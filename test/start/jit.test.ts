import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase, TEST_DATABASES } from '../helpers/databases.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const run = promisify(execFile);

/**
 * A process that sets up what it is given (the runtime of a service on PostgreSQL, or the
 * embedded database's JIT setting alone), then makes a function hot and reports which of V8's
 * compilers compiled it: `%GetOptimizationStatus` has bit 5 for Maglev and bit 6 for TurboFan.
 * In a child process, since the flag is the process's and the test runner's own must not change.
 */
function program(setUp: string): string {
  return `
const root = ${JSON.stringify(pathToFileURL(`${ROOT}/`).href)};
${setUp}
function sumTwice(values) { let sum = 0; for (let i = 0; i < values.length; i++) sum += values[i] * 2; return sum; }
const values = Array.from({ length: 100 }, (_, i) => i);
let maglev = false;
let turbofan = false;
const until = Date.now() + 20_000;
while (!turbofan && Date.now() < until) {
  for (let i = 0; i < 50; i++) sumTwice(values);
  const status = %GetOptimizationStatus(sumTwice);
  maglev ||= (status & (1 << 5)) !== 0;
  turbofan = (status & (1 << 6)) !== 0;
}
process.stdout.write(JSON.stringify({ maglev, turbofan }));
process.exit(0);
`;
}

async function compilersOf(setUp: string): Promise<{ maglev: boolean; turbofan: boolean }> {
  const { stdout } = await run(
    process.execPath,
    ['--allow-natives-syntax', '--input-type=module', '-e', program(setUp)],
    { cwd: ROOT, timeout: 60_000 },
  );
  return JSON.parse(stdout);
}

describe.runIf(TEST_DATABASES.includes('postgres'))('the JIT settings on PostgreSQL', () => {
  let database: Awaited<ReturnType<typeof createPostgresDatabase>>;
  beforeAll(async () => {
    database = await createPostgresDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('a runtime on PostgreSQL compiles hot code without Maglev (straight to TurboFan)', async () => {
    const compilers = await compilersOf(`
const { loadConfig } = await import(root + 'src/config.ts');
const { openRuntime } = await import(root + 'src/start/runtime.ts');
const config = loadConfig({ DATABASE_URL: ${JSON.stringify(database.url)} });
const runtime = await openRuntime(config, { logger: { info() {}, warn() {}, error() {} }, works: false });
await runtime.database.close();
`);
    expect(compilers).toEqual({ maglev: false, turbofan: true });
  });
});

describe('the JIT settings of a process on the embedded database', () => {
  it('keeps Maglev on', async () => {
    const compilers = await compilersOf(`
const { tuneJitForDatabase } = await import(root + 'src/start/jit.ts');
tuneJitForDatabase('pglite');
`);
    expect(compilers.maglev).toBe(true);
  });
});

import { describe, expect, it } from 'vitest';
import { runProgram } from '../helpers/child-program.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { openRuntimeOnPostgres, usePostgresDatabase } from './runtime-program.ts';

/** V8's `--invocation-count-for-turbofan` default in Node 24. */
const TURBOFAN_CALLS_BY_DEFAULT = 3000;

/**
 * A process that sets up what it is given (the runtime of a service on PostgreSQL, or the
 * embedded database's JIT setting alone), then makes a function hot and reports which of V8's
 * compilers compiled it (`%GetOptimizationStatus` has bit 5 for Maglev and bit 6 for TurboFan)
 * and after how many calls TurboFan's code ran. The function has no loop, so that each call
 * spends the same tier-up budget, and the process compiles on its main thread
 * (`--no-concurrent-recompilation`), so that the count does not depend on a compiler thread's
 * timing.
 */
function program(setUp: string): string {
  return `
${setUp}
function priceOf(lead) { const base = lead.quantity * lead.unit; return lead.discounted ? base - (base >> 3) : base; }
const lead = { quantity: 3, unit: 40, discounted: true };
let maglev = false;
let turbofan = false;
let calls = 0;
while (!turbofan && calls < 1_000_000) {
  priceOf(lead);
  calls += 1;
  const status = %GetOptimizationStatus(priceOf);
  maglev ||= (status & (1 << 5)) !== 0;
  turbofan = (status & (1 << 6)) !== 0;
}
process.stdout.write(JSON.stringify({ maglev, turbofan, calls }));
process.exit(0);
`;
}

interface Compilers {
  maglev: boolean;
  turbofan: boolean;
  /** Calls of the hot function until TurboFan's code was installed. */
  calls: number;
}

async function compilersOf(setUp: string, nodeFlags: string[] = []): Promise<Compilers> {
  const stdout = await runProgram(program(setUp), [
    '--allow-natives-syntax',
    '--no-concurrent-recompilation',
    ...nodeFlags,
  ]);
  return JSON.parse(stdout);
}

describe.runIf(TEST_DATABASES.includes('postgres'))('the JIT settings on PostgreSQL', () => {
  const databaseUrl = usePostgresDatabase();

  it("a runtime on PostgreSQL compiles hot code without Maglev, with TurboFan after a third of V8's usual calls", async () => {
    const compilers = await compilersOf(openRuntimeOnPostgres(databaseUrl()));
    expect(compilers).toMatchObject({ maglev: false, turbofan: true });
    expect(compilers.calls).toBeLessThan(TURBOFAN_CALLS_BY_DEFAULT * 0.45);
  });

  it('Maglev turned off at run time alone leaves TurboFan later than its usual calls (the comparison above can fail)', async () => {
    const compilers = await compilersOf(`
const { setFlagsFromString } = await import('node:v8');
setFlagsFromString('--no-maglev');
`);
    expect(compilers).toMatchObject({ maglev: false, turbofan: true });
    expect(compilers.calls).toBeGreaterThan(TURBOFAN_CALLS_BY_DEFAULT);
  });
});

describe('the JIT settings of a process on the embedded database', () => {
  it('keeps Maglev on, and TurboFan at its usual calls', async () => {
    const compilers = await compilersOf(`
const { tuneJitForDatabase } = await import(root + 'src/start/jit.ts');
tuneJitForDatabase('pglite');
`);
    expect(compilers.maglev).toBe(true);
    expect(compilers.calls).toBeGreaterThan(TURBOFAN_CALLS_BY_DEFAULT * 0.8);
  });
});

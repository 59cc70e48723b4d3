import { describe, expect, it } from 'vitest';
import { runProgram } from '../helpers/child-program.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { openRuntimeOnPostgres, usePostgresDatabase } from './runtime-program.ts';

/**
 * A process that sets up what it is given, then makes objects at one place in its code and keeps
 * them all, so that every young-generation collection finds them alive: what makes V8 decide to
 * make that place's objects in the old generation (allocation-site pretenuring). V8 prints its
 * decisions with `--trace-pretenuring-statistics` and each collection with `--trace-gc`, both on
 * stdout in order; a full collection the program asks for (`gc()`, which V8 names "testing")
 * marks where the set-up ended, so that decisions made while modules loaded are not counted.
 */
function program(setUp: string): string {
  return `
${setUp}
globalThis.gc();
function leadOf(n) { return { n, stage: 'new', score: n % 7 }; }
const kept = [];
for (let n = 0; n < 1_500_000; n++) kept.push(leadOf(n));
process.exit(kept.length > 0 ? 0 : 1);
`;
}

/** The pretenuring decisions V8 printed after the set-up (`=> tenure`), and whether it printed the marker. */
async function decisionsAfterSetUp(setUp: string): Promise<{ marked: boolean; tenured: number }> {
  const stdout = await runProgram(program(setUp), [
    '--expose-gc',
    // The interpreter alone: optimized code that a compiler thread installs between two
    // collections makes its objects without the notes V8 counts them by, and under load that
    // sometimes left the decision out.
    '--max-opt=0',
    '--trace-gc',
    '--trace-pretenuring-statistics',
  ]);
  const lines = stdout.split('\n');
  const marker = lines.findIndex((line) => line.includes('Mark-Compact') && line.includes('testing'));
  const after = marker === -1 ? [] : lines.slice(marker + 1);
  return { marked: marker !== -1, tenured: after.filter((line) => line.includes('=> tenure')).length };
}

describe('allocation-site pretenuring', () => {
  it('without the setting, V8 moves a place whose objects outlive a young collection to the old generation (the checks below can fail)', async () => {
    const decisions = await decisionsAfterSetUp('');
    expect(decisions.marked).toBe(true);
    expect(decisions.tenured).toBeGreaterThan(0);
  });

  it('tuneHeapForService turns allocation-site pretenuring off', async () => {
    const decisions = await decisionsAfterSetUp(`
const { tuneHeapForService } = await import(root + 'src/start/heap.ts');
tuneHeapForService();
`);
    expect(decisions).toEqual({ marked: true, tenured: 0 });
  });
});

describe.runIf(TEST_DATABASES.includes('postgres'))('the heap settings on PostgreSQL', () => {
  const databaseUrl = usePostgresDatabase();

  it('a runtime on PostgreSQL turns allocation-site pretenuring off', async () => {
    const decisions = await decisionsAfterSetUp(openRuntimeOnPostgres(databaseUrl()));
    expect(decisions).toEqual({ marked: true, tenured: 0 });
  });
});

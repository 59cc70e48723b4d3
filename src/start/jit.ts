import { setFlagsFromString } from 'node:v8';
import type { DatabaseHandle } from '../db/client.ts';

/**
 * Calls of a function (in V8's budget of bytecode executed) before TurboFan compiles it, in a
 * process without Maglev: a third of V8's default of 3,000.
 */
const TURBOFAN_INVOCATIONS_WITHOUT_MAGLEV = 1000;

/**
 * Turns off Maglev, V8's middle JavaScript compiler, in a process that serves from PostgreSQL.
 * There, in back-to-back bench runs, it held 10–25 MB more at the peak (its compiles' zone memory
 * stays in the malloc arenas of V8's compiler threads, and its code in the heap) for no CPU saved
 * per request once the code is hot. On the embedded database, whose SQL runs on the same thread,
 * single-record intake took about a fifth more CPU a record without it, so it stays on there
 * (docs/decisions.md, Runtime and storage).
 *
 * Maglev turned off at run time did not bring TurboFan sooner: a function went to TurboFan after
 * about 10,000 calls, as with Maglev (V8's default of 3,000 holds only with `--no-maglev` on the
 * command line; `test/start/jit.test.ts` counts them). Until then it ran in the baseline
 * compiler's code, so functions called once per grouped statement (a tenth of the requests)
 * were still waiting for TurboFan in the first 20 seconds after the warm-up, when the service
 * spent 1.6–1.9 times the baseline's CPU a request against 1.1–1.5 later. TurboFan therefore
 * starts after 1,000 calls (docs/decisions.md, Benchmark, "Intake's first round on PostgreSQL").
 *
 * It must run before the load makes functions hot; V8 reads these flags at each tier-up decision,
 * and the V8 in Node 24 lets flags change after start (`--no-freeze-flags-after-init` is its
 * default).
 */
export function tuneJitForDatabase(kind: DatabaseHandle['kind']): void {
  if (kind !== 'postgres') return;
  setFlagsFromString('--no-maglev');
  setFlagsFromString(`--invocation-count-for-turbofan=${TURBOFAN_INVOCATIONS_WITHOUT_MAGLEV}`);
}

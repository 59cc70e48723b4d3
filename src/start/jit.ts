import { setFlagsFromString } from 'node:v8';
import type { DatabaseHandle } from '../db/client.ts';

/**
 * Turns off Maglev, V8's middle JavaScript compiler, in a process that serves from PostgreSQL.
 * There, in back-to-back bench runs, it held 10–25 MB more at the peak (its compiles' zone memory
 * stays in the malloc arenas of V8's compiler threads, and its code in the heap) for no CPU saved
 * per request: hot functions go from the baseline compiler to TurboFan as before. On the embedded
 * database, whose SQL runs on the same thread, single-record intake took about a fifth more CPU
 * a record without it, so it stays on there (docs/decisions.md, Runtime and storage).
 *
 * It must run before the load makes functions hot; V8 reads the flag at each tier-up decision,
 * and the V8 in Node 24 lets flags change after start (`--no-freeze-flags-after-init` is its
 * default).
 */
export function tuneJitForDatabase(kind: DatabaseHandle['kind']): void {
  if (kind === 'postgres') setFlagsFromString('--no-maglev');
}

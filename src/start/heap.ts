import { setFlagsFromString } from 'node:v8';

/**
 * Turns off V8's allocation-site pretenuring in a process that serves. V8 counts, for the
 * objects made at one place in the code, how many are still alive at a young-generation
 * collection; where nearly all are, it makes that place's objects in the old generation from then
 * on. Under load a request's objects live as long as the request waits for the database, so at
 * every collection those of the requests in flight are alive, and V8 took the places that make
 * them (reading a body, building a row, the grouped statement) for long-lived: it then made them
 * in the old generation, which a full collection had to clear every 2–3 s, each stopping the
 * thread for up to 20 ms. Without it they die young, as they are (docs/decisions.md, Runtime
 * and storage, "Pretenuring off").
 *
 * V8 reads the flag at each collection and compile, and the V8 in Node 24 lets flags change after
 * start (`--no-freeze-flags-after-init` is its default), so it holds from here on; places that it
 * had already moved to the old generation while modules loaded are not hot code.
 */
export function tuneHeapForService(): void {
  setFlagsFromString('--no-allocation-site-pretenuring');
}

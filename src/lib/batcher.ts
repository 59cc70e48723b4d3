/**
 * Groups work that arrives together or while earlier work is still running (group commit). At
 * most `maxInFlight` batches run at once. A batch starts at the end of the event loop's current
 * turn (`setImmediate`), not at the first item: requests that the server read from several
 * connections in one turn then go together. An item that arrives while all batches are busy
 * waits and goes with the others that waited, in one batch of at most `maxBatch` items of the
 * same group. A lone item waits for nothing but the end of its turn.
 *
 * That turn matters most on the embedded database: PGlite runs each statement in the server's
 * own thread, so no statement is ever "still running" when the next request is read, and only
 * the requests of one turn can share a statement (on the bench: 1,465 → 4,900 records a second).
 */
export interface Batcher<Item, Result> {
  submit(group: string, item: Item): Promise<Result>;
}

interface Waiting<Item, Result> {
  item: Item;
  resolve(result: Result): void;
  reject(error: unknown): void;
}

export function createBatcher<Item, Result>(options: {
  maxBatch: number;
  maxInFlight: number;
  /** Runs one batch; answers one result per item, in order. */
  run(group: string, items: Item[]): Promise<Result[]>;
}): Batcher<Item, Result> {
  // Map order is the order groups started waiting; a group that still has items after its
  // batch goes to the back, so that one busy group does not starve the others.
  const waiting = new Map<string, Waiting<Item, Result>[]>();
  let inFlight = 0;
  /** Whether a pump is due at the end of this turn. */
  let pumpScheduled = false;

  function pump() {
    while (inFlight < options.maxInFlight && waiting.size > 0) {
      const [group, queue] = waiting.entries().next().value as [string, Waiting<Item, Result>[]];
      const batch = queue.splice(0, options.maxBatch);
      waiting.delete(group);
      if (queue.length > 0) waiting.set(group, queue);
      inFlight++;
      run(group, batch).finally(() => {
        inFlight--;
        pump();
      });
    }
  }

  async function run(group: string, batch: Waiting<Item, Result>[]) {
    try {
      const results = await options.run(
        group,
        batch.map((entry) => entry.item),
      );
      if (results.length !== batch.length) throw new Error('a batch answered the wrong number of results');
      for (const [index, entry] of batch.entries()) entry.resolve(results[index]!);
    } catch (error) {
      for (const entry of batch) entry.reject(error);
    }
  }

  return {
    submit(group, item) {
      return new Promise<Result>((resolve, reject) => {
        const queue = waiting.get(group);
        if (queue) queue.push({ item, resolve, reject });
        else waiting.set(group, [{ item, resolve, reject }]);
        if (!pumpScheduled) {
          pumpScheduled = true;
          setImmediate(() => {
            pumpScheduled = false;
            pump();
          });
        }
      });
    },
  };
}

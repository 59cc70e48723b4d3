/**
 * Groups work that arrives while earlier work is still running (group commit). At most
 * `maxInFlight` batches run at once; an item that arrives while all of them are busy waits and
 * goes with the others that waited, in one batch of at most `maxBatch` items of the same group.
 * When nothing else runs, an item goes at once, alone: batching never adds a wait of its own.
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
        pump();
      });
    },
  };
}

import { describe, expect, it } from 'vitest';
import { createBatcher } from '../../src/lib/batcher.ts';

/** The end of the event loop's current turn, when a batch that is due starts. */
const endOfTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function deferred() {
  let release!: () => void;
  const promise = new Promise<void>((resolve) => {
    release = resolve;
  });
  return { promise, release };
}

describe('the batcher (group commit)', () => {
  describe('happy path', () => {
    it('runs a lone item alone, at the end of the turn it came in', async () => {
      const batches: number[][] = [];
      const batcher = createBatcher<number, number>({
        maxBatch: 10,
        maxInFlight: 1,
        run: async (_group, items) => {
          batches.push(items);
          return items.map((item) => item * 2);
        },
      });
      const first = batcher.submit('a', 1);
      expect(batches).toEqual([]);
      await endOfTurn();
      expect(batches).toEqual([[1]]);
      expect(await first).toBe(2);
      expect(await batcher.submit('a', 2)).toBe(4);
      expect(batches).toEqual([[1], [2]]);
    });

    it('puts the items of one turn together, at most maxBatch in a batch', async () => {
      const batches: number[][] = [];
      const batcher = createBatcher<number, number>({
        maxBatch: 3,
        maxInFlight: 2,
        run: async (_group, items) => {
          batches.push(items);
          return items;
        },
      });
      expect(await Promise.all([1, 2, 3, 4, 5].map((item) => batcher.submit('a', item)))).toEqual([
        1, 2, 3, 4, 5,
      ]);
      expect(batches).toEqual([
        [1, 2, 3],
        [4, 5],
      ]);
    });

    it('groups the items that arrive while all batches run, at most maxBatch at a time, in order', async () => {
      const gate = deferred();
      const batches: number[][] = [];
      const batcher = createBatcher<number, string>({
        maxBatch: 3,
        maxInFlight: 1,
        run: async (_group, items) => {
          batches.push(items);
          if (batches.length === 1) await gate.promise;
          return items.map((item) => `done ${item}`);
        },
      });
      const answers = [batcher.submit('a', 1)];
      await endOfTurn();
      // The first batch runs; the next items wait for it.
      answers.push(...[2, 3, 4, 5, 6].map((item) => batcher.submit('a', item)));
      await endOfTurn();
      expect(batches).toEqual([[1]]);
      gate.release();
      expect(await Promise.all(answers)).toEqual([1, 2, 3, 4, 5, 6].map((item) => `done ${item}`));
      expect(batches).toEqual([[1], [2, 3, 4], [5, 6]]);
    });

    it('never mixes groups, and takes turns between them', async () => {
      const gate = deferred();
      const batches: string[] = [];
      const batcher = createBatcher<string, string>({
        maxBatch: 2,
        maxInFlight: 1,
        run: async (group, items) => {
          batches.push(`${group}:${items.join(',')}`);
          if (batches.length === 1) await gate.promise;
          return items;
        },
      });
      const answers = [batcher.submit('first', 'x')];
      await endOfTurn();
      answers.push(
        batcher.submit('a', 'a1'),
        batcher.submit('a', 'a2'),
        batcher.submit('a', 'a3'),
        batcher.submit('b', 'b1'),
      );
      gate.release();
      await Promise.all(answers);
      expect(batches).toEqual(['first:x', 'a:a1,a2', 'b:b1', 'a:a3']);
    });
  });

  describe('errors', () => {
    it('rejects every item of a failed batch, and runs the next batches all the same', async () => {
      const gate = deferred();
      let calls = 0;
      const batcher = createBatcher<number, number>({
        maxBatch: 10,
        maxInFlight: 1,
        run: async (_group, items) => {
          calls++;
          if (calls === 1) {
            await gate.promise;
            return items;
          }
          if (calls === 2) throw new Error('statement failed');
          return items;
        },
      });
      const first = batcher.submit('a', 0);
      await endOfTurn();
      const failed = [batcher.submit('a', 1), batcher.submit('a', 2)];
      gate.release();
      expect(await first).toBe(0);
      for (const answer of failed) await expect(answer).rejects.toThrow('statement failed');
      expect(await batcher.submit('a', 3)).toBe(3);
    });

    it('rejects a batch that answers the wrong number of results', async () => {
      const batcher = createBatcher<number, number>({
        maxBatch: 10,
        maxInFlight: 1,
        run: async () => [],
      });
      await expect(batcher.submit('a', 1)).rejects.toThrow('wrong number');
    });
  });
});

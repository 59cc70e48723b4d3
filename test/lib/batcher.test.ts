import { describe, expect, it } from 'vitest';
import { createBatcher } from '../../src/lib/batcher.ts';

function deferred() {
  let release!: () => void;
  const promise = new Promise<void>((resolve) => {
    release = resolve;
  });
  return { promise, release };
}

describe('the batcher (group commit)', () => {
  describe('happy path', () => {
    it('runs an item at once, alone, when nothing else runs', async () => {
      const batches: number[][] = [];
      const batcher = createBatcher<number, number>({
        maxBatch: 10,
        maxInFlight: 1,
        run: async (_group, items) => {
          batches.push(items);
          return items.map((item) => item * 2);
        },
      });
      expect(await batcher.submit('a', 1)).toBe(2);
      expect(await batcher.submit('a', 2)).toBe(4);
      expect(batches).toEqual([[1], [2]]);
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
      const answers = [1, 2, 3, 4, 5, 6].map((item) => batcher.submit('a', item));
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
      const answers = [
        batcher.submit('first', 'x'),
        batcher.submit('a', 'a1'),
        batcher.submit('a', 'a2'),
        batcher.submit('a', 'a3'),
        batcher.submit('b', 'b1'),
      ];
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

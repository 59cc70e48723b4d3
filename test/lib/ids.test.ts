import { describe, expect, it } from 'vitest';
import { timeOrderedId } from '../../src/lib/ids.ts';
import { millisecondsOf, TIME_ORDERED_UUID } from '../helpers/ids.ts';

describe('time-ordered ids', () => {
  it('are UUIDs of version 7 and the RFC 9562 variant, carrying the current time in ms', () => {
    const before = Date.now();
    const ids = Array.from({ length: 1000 }, () => timeOrderedId());
    const after = Date.now();
    for (const id of ids) {
      expect(id).toMatch(TIME_ORDERED_UUID);
      expect(millisecondsOf(id)).toBeGreaterThanOrEqual(before);
      expect(millisecondsOf(id)).toBeLessThanOrEqual(after);
    }
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('sort after the ids of earlier milliseconds, and differ in their random part within one', async () => {
    const first = timeOrderedId();
    await new Promise((resolve) => setTimeout(resolve, 3));
    const second = timeOrderedId();
    expect(millisecondsOf(second)).toBeGreaterThan(millisecondsOf(first));
    expect(second > first).toBe(true);
    // 74 random bits: ids of one millisecond share the time and almost nothing else.
    const sameMs = Array.from({ length: 200 }, () => timeOrderedId()).filter(
      (id) => millisecondsOf(id) === millisecondsOf(second),
    );
    const tails = new Set(sameMs.map((id) => id.slice(15)));
    expect(tails.size).toBe(sameMs.length);
  });

  it('take every one of their 74 free bits at random, across refills of the random pool', () => {
    // 5,000 ids use up the pool of random bytes a dozen times.
    const ids = Array.from({ length: 5000 }, () => timeOrderedId());
    // Digit positions after the time and version: 15–17, the variant digit 19, 20–22, 24–35.
    const randomDigits = [15, 16, 17, 20, 21, 22, ...Array.from({ length: 12 }, (_, i) => 24 + i)];
    for (const position of randomDigits) {
      expect(new Set(ids.map((id) => id[position])).size, `digit ${position}`).toBe(16);
    }
    expect(new Set(ids.map((id) => id[19]))).toEqual(new Set(['8', '9', 'a', 'b']));
    // Each random byte is drawn once: two byte positions, in one id or in neighbouring ids, are
    // equal about once in 256, not more often, as they would be if a byte were used twice.
    const bytesAt = [16, 21, 24, 26, 28, 30, 32, 34];
    const bytesOf = (id: string) => bytesAt.map((at) => id.slice(at, at + 2));
    const pairs = [...ids.keys()].slice(1).map((i) => [...bytesOf(ids[i - 1]!), ...bytesOf(ids[i]!)]);
    for (let a = 0; a < 16; a++) {
      for (let b = a + 1; b < 16; b++) {
        const equal = pairs.filter((bytes) => bytes[a] === bytes[b]).length;
        expect(equal / pairs.length, `bytes ${a} and ${b}`).toBeLessThan(0.02);
      }
    }
  });
});

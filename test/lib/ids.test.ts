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
});

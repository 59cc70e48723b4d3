import { describe, expect, it } from 'vitest';
import { timeOrderedId } from '../../src/lib/ids.ts';

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const millisecondsOf = (id: string) => Number.parseInt(id.replaceAll('-', '').slice(0, 12), 16);

describe('time-ordered ids', () => {
  it('are UUIDs of version 7 and the RFC 9562 variant, carrying the current time in ms', () => {
    const before = Date.now();
    const ids = Array.from({ length: 1000 }, () => timeOrderedId());
    const after = Date.now();
    for (const id of ids) {
      expect(id).toMatch(V7);
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

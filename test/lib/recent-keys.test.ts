import { describe, expect, it } from 'vitest';
import { createRecentKeys } from '../../src/lib/recent-keys.ts';

describe('recent keys', () => {
  function clocked(max = 3) {
    let at = 1_000;
    const keys = createRecentKeys({ forMs: 100, max, now: () => at });
    return { keys, advance: (ms: number) => (at += ms) };
  }

  it('remembers a key for its time after it was last added, then forgets it', () => {
    const { keys, advance } = clocked();
    expect(keys.has('a')).toBe(false);
    keys.add('a');
    advance(99);
    expect(keys.has('a')).toBe(true);
    keys.add('a');
    advance(99);
    expect(keys.has('a')).toBe(true);
    advance(1);
    expect(keys.has('a')).toBe(false);
    expect(keys.size).toBe(0);
  });

  it('keeps at most its number of keys, forgetting the one added longest ago', () => {
    const { keys } = clocked(2);
    keys.add('a');
    keys.add('b');
    keys.add('a');
    keys.add('c');
    expect(keys.size).toBe(2);
    expect(keys.has('b')).toBe(false);
    expect(keys.has('a')).toBe(true);
    expect(keys.has('c')).toBe(true);
  });
});

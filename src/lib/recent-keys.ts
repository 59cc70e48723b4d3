/**
 * Keys remembered for a while: each for `forMs` after it was last added, at most `max` of them
 * (adding one more forgets the key added longest ago). Memory of one process, as a hint: a
 * forgotten key costs a little work, never a wrong answer.
 */
export function createRecentKeys(options: { forMs: number; max: number; now?: () => number }) {
  const now = options.now ?? Date.now;
  /** Key → until when it is remembered; in the order the keys were last added. */
  const until = new Map<string, number>();
  return {
    has(key: string): boolean {
      const at = until.get(key);
      if (at === undefined) return false;
      if (at > now()) return true;
      until.delete(key);
      return false;
    },

    add(key: string): void {
      until.delete(key);
      if (until.size >= options.max) {
        const oldest = until.keys().next().value;
        if (oldest !== undefined) until.delete(oldest);
      }
      until.set(key, now() + options.forMs);
    },

    get size(): number {
      return until.size;
    },
  };
}

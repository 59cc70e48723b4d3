import { randomFillSync } from 'node:crypto';

/** The time part of the ids of the current millisecond, made once per millisecond. */
let prefixMs = -1;
let prefix = '';

/** Random bytes for 409 ids, filled from the system's cryptographic source when used up. */
const pool = new Uint8Array(4096);
let poolAt = pool.length;
const BYTES_PER_ID = 10;

/** Each byte as two hexadecimal digits, and each half-byte as one. */
const HEX_BYTE = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'));
const HEX_DIGIT = Array.from({ length: 16 }, (_, digit) => digit.toString(16));

/**
 * A UUID version 7 (RFC 9562 §5.7): the first 48 bits are the Unix time in milliseconds, the
 * other 74 free bits random. Rows keyed by it go to the right-hand end of their primary key's
 * index instead of onto a random page, so that a table of millions of rows takes new rows on a
 * few hot pages (fewer page reads, and after a checkpoint fewer full-page images in the WAL).
 * Ids made in one millisecond are in random order among themselves.
 *
 * The random bits come from a pool of bytes filled by `randomFillSync` (as Node's own
 * `randomUUID()` caches its entropy), written as hexadecimal through a table: 0.15 µs an id,
 * where cutting a `randomUUID()` to fit took 0.45 µs (its string had to be copied) and the
 * `uuid` package's `v7()` about 2 µs, as it asks the system for 16 random bytes on every call
 * (docs/decisions.md, "Time-ordered ids").
 */
export function timeOrderedId(): string {
  const now = Date.now();
  if (now !== prefixMs) {
    const time = now.toString(16).padStart(12, '0');
    prefix = `${time.slice(0, 8)}-${time.slice(8, 12)}-7`;
    prefixMs = now;
  }
  if (poolAt + BYTES_PER_ID > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const at = poolAt;
  poolAt += BYTES_PER_ID;
  // 12 random bits after the version digit; the variant's two bits (10) and 62 random bits.
  return `${prefix}${HEX_DIGIT[pool[at]! & 0x0f]}${HEX_BYTE[pool[at + 1]!]}-${HEX_BYTE[(pool[at + 2]! & 0x3f) | 0x80]}${HEX_BYTE[pool[at + 3]!]}-${HEX_BYTE[pool[at + 4]!]}${HEX_BYTE[pool[at + 5]!]}${HEX_BYTE[pool[at + 6]!]}${HEX_BYTE[pool[at + 7]!]}${HEX_BYTE[pool[at + 8]!]}${HEX_BYTE[pool[at + 9]!]}`;
}

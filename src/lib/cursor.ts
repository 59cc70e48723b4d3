import { AppError } from '../http/errors.ts';

/** Position after the last row of a page: the row's sort timestamp and id (decisions §6). */
export interface CursorPosition {
  createdAt: string;
  id: string;
}

/** The form `toISOString` gives the cursors this service issues; the database reads it exactly. */
const ISSUED_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * A cursor: the last row's sort timestamp and id, and for a list with several orders the order
 * it was issued for (`order`), so that it is not read as a position in another order.
 */
export function encodeCursor(createdAt: Date | string, id: string, order?: string): string {
  const at = createdAt instanceof Date ? createdAt.toISOString() : createdAt;
  const position = order === undefined ? [at, id] : [at, id, order];
  return Buffer.from(JSON.stringify(position), 'utf8').toString('base64url');
}

/**
 * Reads a cursor this service issued. `order` is the order the list is asked in: a cursor issued
 * for another order is refused (its timestamp is another column's), not reinterpreted. A cursor
 * without an order (issued before orders were written into cursors) is read as before.
 */
export function decodeCursor(cursor: string | undefined, order?: string): CursorPosition | null {
  if (cursor === undefined || cursor === '') return null;
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (
      Array.isArray(parsed) &&
      (parsed.length === 2 || (parsed.length === 3 && typeof parsed[2] === 'string')) &&
      typeof parsed[0] === 'string' &&
      typeof parsed[1] === 'string' &&
      ISSUED_TIMESTAMP.test(parsed[0]) &&
      !Number.isNaN(Date.parse(parsed[0])) &&
      /^[0-9a-f-]{36}$/i.test(parsed[1])
    ) {
      const issuedFor = parsed[2] as string | undefined;
      if (issuedFor !== undefined && issuedFor !== order) {
        throw new AppError('validation_failed', {
          details: [
            {
              key: 'cursor',
              reason: 'invalid_format',
              message: `cursor was issued for order=${issuedFor}; ask for that order, or start again without a cursor`,
            },
          ],
        });
      }
      return { createdAt: parsed[0], id: parsed[1] };
    }
  } catch (error) {
    if (error instanceof AppError) throw error;
    // Falls through to the error below.
  }
  throw new AppError('validation_failed', {
    details: [{ key: 'cursor', reason: 'invalid_format', message: 'cursor is not one this service issued' }],
  });
}

/** Cuts one extra row off a page and turns it into the next cursor. */
export function pageOf<T extends { created_at: Date; id: string }>(
  rows: T[],
  limit: number,
): { items: T[]; nextCursor: string | null } {
  if (rows.length <= limit) return { items: rows, nextCursor: null };
  const items = rows.slice(0, limit);
  const last = items[items.length - 1]!;
  return { items, nextCursor: encodeCursor(last.created_at, last.id) };
}

const EARLIEST = Date.parse('0001-01-01T00:00:00Z');
const LATEST = Date.parse('9999-12-31T23:59:59.999Z');

/** A client's time the database can take as a timestamp: JavaScript dates reach further. */
export function isStorableTime(date: Date): boolean {
  const time = date.getTime();
  return time >= EARLIEST && time <= LATEST;
}

const DAY_MS = 86_400_000;
const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;

/**
 * A bound of a time filter (`from`/`to`, `created_from`/`created_to`): a date means its whole day
 * (UTC), a timestamp the instant. An upper bound comes back exclusive: the instant after `to`,
 * or the start of the day after a date.
 */
export function timeBound(value: string | undefined, upper: boolean): Date | undefined {
  if (value === undefined) return undefined;
  const at = new Date(DATE_ONLY.test(value) ? `${value}T00:00:00.000Z` : value);
  if (!upper) return at;
  return new Date(at.getTime() + (DATE_ONLY.test(value) ? DAY_MS : 1));
}

/**
 * Refuses time filters the schema's `date-time` format lets through but that name no storable
 * instant (a leap second `23:59:60`, which `Date` cannot read, or a year the database cannot
 * hold): 422 naming each, rather than a failed statement (500). `bounds` maps the query names to
 * what `timeBound` (or `new Date`) made of them; `expected` is what the message says they must be.
 */
export function refuseUnstorableTimes(
  bounds: Record<string, Date | undefined>,
  expected = 'an ISO date or timestamp',
): void {
  const details = Object.entries(bounds)
    .filter(([, at]) => at !== undefined && !isStorableTime(at))
    .map(([key]) => ({ key, reason: 'invalid_format', message: `${key} must be ${expected}` }));
  if (details.length > 0) throw new AppError('validation_failed', { details });
}

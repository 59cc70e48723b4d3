import { type RawBuilder, type SqlBool, sql } from 'kysely';

/**
 * The rows past a page's last row in `(time, id)` order, for cursor pages (decisions §6): one row
 * comparison, `(time, id) > (at, id)` (or `<` for newest-first lists). PostgreSQL takes a row
 * comparison as a bound of an index on `(account_id, time, id)` and starts the scan at the
 * cursor; the equivalent `time > at OR (time = at AND id > id)` is only a filter, applied to every
 * row from the list's first. `timeColumn` and `idColumn` may carry a table alias (`a.created_at`).
 */
export function pastCursor(
  timeColumn: string,
  idColumn: string,
  direction: 'after' | 'before',
  at: Date | string,
  id: string,
): RawBuilder<SqlBool> {
  const comparison = direction === 'after' ? sql.raw('>') : sql.raw('<');
  const time = at instanceof Date ? at : new Date(at);
  return sql<SqlBool>`(${sql.ref(timeColumn)}, ${sql.ref(idColumn)}) ${comparison} (${time}::timestamptz, ${id}::uuid)`;
}

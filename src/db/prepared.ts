import { sql } from 'kysely';

/**
 * Hot statements are prepared once per PostgreSQL connection and afterwards executed by name.
 * Parsing and planning a statement can cost more than running it: the one-statement intake ran
 * about 1,950 times a second unnamed and 5,760 times prepared on the same database (pgbench,
 * 4 clients). A statement opts in by ending with this comment: `.modifyEnd(PREPARED)` on the
 * query builder, `${PREPARED}` as the last part of a raw `sql` template. Only fixed texts of the
 * code carry it (never one whose text grows with its input, such as an `in` list), so the
 * number of prepared statements per connection stays small and known. On PGlite the same
 * marked texts are prepared in the one embedded connection.
 */
export const PREPARED_MARK = '/* prepared */';
export const PREPARED = sql.raw(PREPARED_MARK);

/** At most this many distinct texts get a name; a text beyond it runs unnamed, as any other. */
const MAX_PREPARED = 200;
const names = new Map<string, string>();

/** The statement name for a marked text, or undefined for a text that is not to be prepared. */
export function preparedNameOf(text: string): string | undefined {
  if (!text.endsWith(PREPARED_MARK)) return undefined;
  let name = names.get(text);
  if (name === undefined && names.size < MAX_PREPARED) {
    name = `leads_${names.size + 1}`;
    names.set(text, name);
  }
  return name;
}

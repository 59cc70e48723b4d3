/**
 * A query string decodes `+` as a space, so a timestamp typed with its offset unescaped
 * (`?from=2026-11-27T10:00:00+01:00`) arrives as `2026-11-27T10:00:00 01:00`. A space there can
 * only be that `+` (a `-` offset is never decoded to anything else), so the time filters read it
 * back as one (docs/decisions.md, HTTP conventions). Other parameters and other spaces are left
 * as they came: the schema still refuses what is not a date or a timestamp.
 */

/** Every query parameter that holds a time filter's bound. */
const TIME_PARAMETERS = ['from', 'to', 'created_from', 'created_to', 'updated_since'] as const;

/** A date and time followed by a space and an offset's hours (and minutes). */
const SPACED_OFFSET = /^(\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?) (\d{2}(?::?\d{2})?)$/;

/**
 * The time filters a route's query schema names (top level, or in an `allOf`/`anyOf` part), so
 * that only those routes restore offsets: intake and the other routes without one skip the hook.
 */
export function timeParametersOf(querySchema: unknown): string[] {
  if (querySchema === null || typeof querySchema !== 'object') return [];
  const schema = querySchema as { properties?: object; allOf?: unknown[]; anyOf?: unknown[] };
  const named = new Set<string>();
  if (schema.properties) {
    for (const name of TIME_PARAMETERS) if (Object.hasOwn(schema.properties, name)) named.add(name);
  }
  for (const part of [...(schema.allOf ?? []), ...(schema.anyOf ?? [])]) {
    for (const name of timeParametersOf(part)) named.add(name);
  }
  return [...named];
}

/** Puts back the `+` of a time filter's offset that the query string's decoding made a space. */
export function restoreOffsetPlus(query: unknown, names: readonly string[]): void {
  if (query === null || typeof query !== 'object') return;
  const parameters = query as Record<string, unknown>;
  for (const name of names) {
    const value = parameters[name];
    if (typeof value !== 'string' || value.length > 64) continue;
    const spaced = SPACED_OFFSET.exec(value);
    if (spaced) parameters[name] = `${spaced[1]}+${spaced[2]}`;
  }
}

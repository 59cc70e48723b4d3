/**
 * jsonb values are always sent as JSON text: node-postgres would turn a JavaScript array into a
 * PostgreSQL array literal, and text is read the same way by PGlite and PostgreSQL.
 */
export function toJson(value: unknown): string {
  return JSON.stringify(value);
}

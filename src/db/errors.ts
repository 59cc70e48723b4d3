/** The database refused a row for a unique index (SQLSTATE 23505), on PostgreSQL and PGlite alike. */
export function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '23505';
}

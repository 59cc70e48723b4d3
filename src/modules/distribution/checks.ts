/** Small checks the distribution settings share. */

/** An email address as a person types it: something@domain.tld, no spaces or angle brackets. */
export const EMAIL_ADDRESS = /^[^\s@<>]+@[^\s@<>]+\.[^\s@<>]+$/;

/** The database refused a row for a unique index (SQLSTATE 23505), on PostgreSQL and PGlite alike. */
export function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '23505';
}

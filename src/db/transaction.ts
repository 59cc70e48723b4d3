import { sql } from 'kysely';
import type { Db, Executor, Tx } from './types.ts';

/** Runs `work` in the caller's transaction when there is one, else in a new one. */
export function inTransaction<T>(db: Db, tx: Tx | undefined, work: (tx: Tx) => Promise<T>): Promise<T> {
  return tx ? work(tx) : db.transaction().execute(work);
}

/**
 * Holds the lock named `name` until `tx` ends (a transaction-level advisory lock): serialises
 * writers that a row lock cannot, such as those checking a count or a name among many rows.
 */
export async function lockNamed(tx: Executor, name: string): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(hashtextextended(${name}, 0))`.execute(tx);
}

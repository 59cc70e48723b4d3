import type { PGlite } from '@electric-sql/pglite';
import type { Db as QueueDatabase } from 'pg-boss';

/**
 * pg-boss's connection to the embedded database: the one PGlite instance the service's Kysely
 * also uses.
 *
 * PGlite is a single session. Its `query()`, `exec()` and `transaction()` all take one lock (the
 * "transaction mutex"), and Kysely's PGlite dialect opens every transaction with `transaction()`,
 * holding that lock until commit or rollback. So a statement sent from here waits for an open
 * Kysely transaction to end instead of running inside it, and a Kysely transaction waits for a
 * pg-boss statement: neither can commit or roll back the other's work.
 *
 * pg-boss sends two kinds of SQL: single statements with parameters (the extended protocol, as
 * `query()` takes them), and parameterless scripts of several statements, often wrapped in their
 * own `BEGIN … COMMIT` (installs, migrations, maintenance), which only `exec()` runs.
 *
 * The script is where pg-boss's own `fromPglite` adapter falls short for a shared instance: when a
 * statement in such a script fails, the session is left inside an aborted transaction, and that
 * adapter sends its `ROLLBACK` as a second call. Between the two calls the lock is free, and a
 * Kysely transaction waiting for it starts inside the aborted block: its `BEGIN` fails and the
 * request fails (or hangs: Kysely's dialect then never sees its transaction begin). Here the
 * script and its recovery run under one hold of the lock, inside `transaction()`, so no other
 * statement can ever see the aborted state.
 */
export function pgliteQueueDatabase(pglite: PGlite): QueueDatabase {
  return {
    async executeSql(text: string, values?: unknown[]) {
      if (values && values.length > 0) {
        // One statement: an error ends its implicit transaction at once, nothing is left open.
        const result = await pglite.query(text, values);
        return { rows: result.rows };
      }
      return pglite.transaction(async (session) => {
        // `transaction()` has just sent BEGIN; end that empty block, so that the script runs as it
        // would on a connection of its own: with its own BEGIN … COMMIT, or as statements that
        // refuse a transaction block (CREATE INDEX CONCURRENTLY in pg-boss's later migrations).
        // The lock stays held until this callback returns.
        await session.exec('COMMIT');
        try {
          const results = await session.exec(text);
          // A RETURNING in the middle of a script must not be lost behind its trailing COMMIT.
          return { rows: results.flatMap((result) => result.rows) };
        } catch (error) {
          // Ends the aborted block the script left open (a no-op warning when there is none),
          // before the lock is released.
          await session.exec('ROLLBACK');
          throw error;
        }
      });
    },
  };
}

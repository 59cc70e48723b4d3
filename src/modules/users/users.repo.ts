import { sql } from 'kysely';
import { pastCursor } from '../../db/keyset.ts';
import type { Executor, Role } from '../../db/types.ts';
import type { CursorPosition } from '../../lib/cursor.ts';

const COLUMNS = ['id', 'email', 'name', 'role', 'created_at'] as const;

export function createUsersRepo(db: Executor) {
  return {
    insert(
      accountId: string,
      user: { id: string; email: string; name: string; role: Role },
      tx: Executor = db,
    ) {
      return tx
        .insertInto('users')
        .values({ account_id: accountId, ...user })
        .onConflict((oc) => oc.doNothing())
        .returning(COLUMNS)
        .executeTakeFirst();
    },

    list(accountId: string, limit: number, after: CursorPosition | null, tx: Executor = db) {
      let query = tx.selectFrom('users').select(COLUMNS).where('account_id', '=', accountId);
      if (after) {
        query = query.where(pastCursor('created_at', 'id', 'after', after.createdAt, after.id));
      }
      return query.orderBy('created_at').orderBy('id').limit(limit).execute();
    },

    find(accountId: string, id: string, tx: Executor = db) {
      return tx
        .selectFrom('users')
        .select(COLUMNS)
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .executeTakeFirst();
    },

    /**
     * Holds the account's row until the transaction ends: changes of users that count owners
     * (the first user, a demotion, a removal) take their turns, so that two at once cannot both
     * take the last owner away. Answers the account's name (what an invitation names).
     */
    async lockAccount(accountId: string, tx: Executor): Promise<string | undefined> {
      const result = await sql<{
        name: string;
      }>`SELECT name FROM accounts WHERE id = ${accountId} FOR UPDATE`.execute(tx);
      return result.rows[0]?.name;
    },

    async countUsers(accountId: string, tx: Executor = db) {
      const row = await tx
        .selectFrom('users')
        .select((eb) => eb.fn.countAll<string>().as('count'))
        .where('account_id', '=', accountId)
        .executeTakeFirstOrThrow();
      return Number(row.count);
    },

    async countOwners(accountId: string, tx: Executor = db) {
      const row = await tx
        .selectFrom('users')
        .select((eb) => eb.fn.countAll<string>().as('count'))
        .where('account_id', '=', accountId)
        .where('role', '=', 'owner')
        .executeTakeFirstOrThrow();
      return Number(row.count);
    },

    update(accountId: string, id: string, changes: { name?: string; role?: Role }, tx: Executor = db) {
      return tx
        .updateTable('users')
        .set({ ...changes, updated_at: new Date() })
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .returning(COLUMNS)
        .executeTakeFirst();
    },

    /** The user leaves the records it was assignee or viewer of; the records stay as they are. */
    async releaseRecords(accountId: string, id: string, tx: Executor = db) {
      await sql`UPDATE records SET assignee_id = NULL
        WHERE account_id = ${accountId} AND assignee_id = ${id}`.execute(tx);
      await sql`UPDATE records SET viewer_ids = array_remove(viewer_ids, ${id}::uuid)
        WHERE account_id = ${accountId} AND ${id}::uuid = ANY (viewer_ids)`.execute(tx);
    },

    /** Removes the user; its sessions and sign-in tokens go with it (foreign keys). */
    async delete(accountId: string, id: string, tx: Executor = db) {
      const result = await tx
        .deleteFrom('users')
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .executeTakeFirst();
      return Number(result.numDeletedRows) === 1;
    },

    /** Users named by uuid or email (case-insensitive), for assignees and viewers. */
    findByIdsOrEmails(accountId: string, ids: string[], emails: string[], tx: Executor = db) {
      return tx
        .selectFrom('users')
        .select(['id', 'email'])
        .where('account_id', '=', accountId)
        .where((eb) => {
          const terms = [];
          if (ids.length) terms.push(eb('id', 'in', ids));
          if (emails.length)
            terms.push(
              eb(
                eb.fn('lower', ['email']),
                'in',
                emails.map((e) => e.toLowerCase()),
              ),
            );
          return terms.length ? eb.or(terms) : eb.val(false);
        })
        .execute();
    },
  };
}

export type UsersRepo = ReturnType<typeof createUsersRepo>;

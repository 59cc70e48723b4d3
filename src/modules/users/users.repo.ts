import type { Executor } from '../../db/types.ts';
import type { CursorPosition } from '../../lib/cursor.ts';

export function createUsersRepo(db: Executor) {
  return {
    insert(accountId: string, user: { id: string; email: string; name: string }, tx: Executor = db) {
      return tx
        .insertInto('users')
        .values({ account_id: accountId, ...user })
        .onConflict((oc) => oc.doNothing())
        .returning(['id', 'email', 'name', 'created_at'])
        .executeTakeFirst();
    },

    list(accountId: string, limit: number, after: CursorPosition | null, tx: Executor = db) {
      let query = tx
        .selectFrom('users')
        .select(['id', 'email', 'name', 'created_at'])
        .where('account_id', '=', accountId);
      if (after) {
        query = query.where((eb) =>
          eb.or([
            eb('created_at', '>', new Date(after.createdAt)),
            eb.and([eb('created_at', '=', new Date(after.createdAt)), eb('id', '>', after.id)]),
          ]),
        );
      }
      return query.orderBy('created_at').orderBy('id').limit(limit).execute();
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

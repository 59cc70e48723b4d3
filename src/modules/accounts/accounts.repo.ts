import { pastCursor } from '../../db/keyset.ts';
import type { Executor } from '../../db/types.ts';
import type { CursorPosition } from '../../lib/cursor.ts';

const COLUMNS = ['id', 'name', 'modules', 'rate_limit_per_minute', 'is_demo', 'created_at'] as const;

/** The accounts table; its id is the account id, so these functions take it as `accountId`. */
export function createAccountsRepo(db: Executor) {
  return {
    insert(
      accountId: string,
      account: { name: string; modules: string[]; rateLimitPerMinute: number; isDemo?: boolean },
      tx: Executor = db,
    ) {
      return tx
        .insertInto('accounts')
        .values({
          id: accountId,
          name: account.name,
          modules: account.modules,
          rate_limit_per_minute: account.rateLimitPerMinute,
          is_demo: account.isDemo ?? false,
        })
        .returning(COLUMNS)
        .executeTakeFirstOrThrow();
    },

    find(accountId: string, tx: Executor = db) {
      return tx.selectFrom('accounts').select(COLUMNS).where('id', '=', accountId).executeTakeFirst();
    },

    list(limit: number, after: CursorPosition | null, tx: Executor = db) {
      let query = tx.selectFrom('accounts').select(COLUMNS);
      if (after) {
        query = query.where(pastCursor('created_at', 'id', 'after', after.createdAt, after.id));
      }
      return query.orderBy('created_at').orderBy('id').limit(limit).execute();
    },

    update(
      accountId: string,
      changes: { name?: string; modules?: string[]; rate_limit_per_minute?: number },
      tx: Executor = db,
    ) {
      return tx
        .updateTable('accounts')
        .set({ ...changes, updated_at: new Date() })
        .where('id', '=', accountId)
        .returning(COLUMNS)
        .executeTakeFirst();
    },
  };
}

export type AccountsRepo = ReturnType<typeof createAccountsRepo>;

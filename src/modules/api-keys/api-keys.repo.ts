import { pastCursor } from '../../db/keyset.ts';
import type { Executor } from '../../db/types.ts';

export interface NewApiKeyRow {
  id: string;
  name: string;
  prefix: string;
  keyHash: Buffer;
  strict: boolean;
  permissions: string[];
  managesUsers: boolean;
}

const KEY_COLUMNS = [
  'id',
  'name',
  'prefix',
  'strict',
  'permissions',
  'manages_users',
  'created_at',
  'revoked_at',
] as const;

export function createApiKeysRepo(db: Executor) {
  return {
    insert(accountId: string, key: NewApiKeyRow, tx: Executor = db) {
      return tx
        .insertInto('api_keys')
        .values({
          account_id: accountId,
          id: key.id,
          name: key.name,
          prefix: key.prefix,
          key_hash: key.keyHash,
          strict: key.strict,
          permissions: key.permissions,
          manages_users: key.managesUsers,
        })
        .returning(KEY_COLUMNS)
        .executeTakeFirstOrThrow();
    },

    /** Active keys, oldest first, after the cursor position. */
    listActive(
      accountId: string,
      limit: number,
      after: { createdAt: string; id: string } | null,
      tx: Executor = db,
    ) {
      let query = tx
        .selectFrom('api_keys')
        .select(KEY_COLUMNS)
        .where('account_id', '=', accountId)
        .where('revoked_at', 'is', null);
      if (after) {
        query = query.where(pastCursor('created_at', 'id', 'after', after.createdAt, after.id));
      }
      return query.orderBy('created_at').orderBy('id').limit(limit).execute();
    },

    findActive(accountId: string, id: string, tx: Executor = db) {
      return tx
        .selectFrom('api_keys')
        .select(KEY_COLUMNS)
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
    },

    update(accountId: string, id: string, changes: { name?: string; strict?: boolean }, tx: Executor = db) {
      return tx
        .updateTable('api_keys')
        .set(changes)
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .where('revoked_at', 'is', null)
        .returning(KEY_COLUMNS)
        .executeTakeFirst();
    },

    revoke(accountId: string, id: string, tx: Executor = db) {
      return tx
        .updateTable('api_keys')
        .set({ revoked_at: new Date() })
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .where('revoked_at', 'is', null)
        .returning('id')
        .executeTakeFirst();
    },
  };
}

export type ApiKeysRepo = ReturnType<typeof createApiKeysRepo>;

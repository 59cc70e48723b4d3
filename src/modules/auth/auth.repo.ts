import { PREPARED } from '../../db/prepared.ts';
import type { Executor } from '../../db/types.ts';

/**
 * Credential look-ups by hash. These are the only queries that do not start from an account
 * id: the credential is what names the account.
 */
export function createAuthRepo(db: Executor) {
  const accountColumns = [
    'accounts.id as account_id',
    'accounts.name as account_name',
    'accounts.modules as account_modules',
    'accounts.rate_limit_per_minute as account_rate_limit',
  ] as const;

  return {
    findActiveApiKey(keyHash: Buffer) {
      return db
        .selectFrom('api_keys')
        .innerJoin('accounts', 'accounts.id', 'api_keys.account_id')
        .select([
          ...accountColumns,
          'api_keys.id',
          'api_keys.name',
          'api_keys.strict',
          'api_keys.permissions',
          'api_keys.manages_users',
        ])
        .where('api_keys.key_hash', '=', keyHash)
        .where('api_keys.revoked_at', 'is', null)
        .modifyEnd(PREPARED)
        .executeTakeFirst();
    },

    async isApiKeyLive(accountId: string, keyId: string) {
      const row = await db
        .selectFrom('api_keys')
        .select('id')
        .where('account_id', '=', accountId)
        .where('id', '=', keyId)
        .where('revoked_at', 'is', null)
        .modifyEnd(PREPARED)
        .executeTakeFirst();
      return row !== undefined;
    },

    findActiveSourceToken(tokenHash: Buffer) {
      return db
        .selectFrom('source_tokens')
        .innerJoin('sources', (join) =>
          join
            .onRef('sources.account_id', '=', 'source_tokens.account_id')
            .onRef('sources.id', '=', 'source_tokens.source_id'),
        )
        .innerJoin('accounts', 'accounts.id', 'source_tokens.account_id')
        .select([
          ...accountColumns,
          'sources.id as source_id',
          'sources.name as source_name',
          'sources.success_url',
          'sources.error_url',
          'sources.allowed_origins',
          'sources.honeypot_field',
          'sources.rate_limit_per_minute',
        ])
        .where('source_tokens.token_hash', '=', tokenHash)
        .where('source_tokens.revoked_at', 'is', null)
        .modifyEnd(PREPARED)
        .executeTakeFirst();
    },

    findLiveRecordToken(tokenHash: Buffer, now: Date) {
      return db
        .selectFrom('record_tokens')
        .innerJoin('accounts', 'accounts.id', 'record_tokens.account_id')
        .select([...accountColumns, 'record_tokens.id', 'record_tokens.record_id', 'record_tokens.fields'])
        .where('record_tokens.token_hash', '=', tokenHash)
        .where('record_tokens.revoked_at', 'is', null)
        .where('record_tokens.expires_at', '>', now)
        .modifyEnd(PREPARED)
        .executeTakeFirst();
    },

    /** A session that has not reached its absolute or idle end, with its user. */
    findLiveSession(tokenHash: Buffer, now: Date, idleSince: Date) {
      return db
        .selectFrom('sessions')
        .innerJoin('users', (join) =>
          join
            .onRef('users.account_id', '=', 'sessions.account_id')
            .onRef('users.id', '=', 'sessions.user_id'),
        )
        .innerJoin('accounts', 'accounts.id', 'sessions.account_id')
        .select([
          ...accountColumns,
          'sessions.id',
          'sessions.via',
          'sessions.created_at',
          'sessions.last_seen_at',
          'users.id as user_id',
          'users.email',
          'users.name',
          'users.role',
          'users.password_hash',
        ])
        .where('sessions.token_hash', '=', tokenHash)
        .where('sessions.expires_at', '>', now)
        .where('sessions.last_seen_at', '>', idleSince)
        .modifyEnd(PREPARED)
        .executeTakeFirst();
    },

    /** Moves the session's idle end on. */
    async touchSession(accountId: string, sessionId: string, now: Date) {
      await db
        .updateTable('sessions')
        .set({ last_seen_at: now })
        .where('account_id', '=', accountId)
        .where('id', '=', sessionId)
        .execute();
    },

    findDocumentAccount(documentId: string) {
      return db
        .selectFrom('documents')
        .innerJoin('accounts', 'accounts.id', 'documents.account_id')
        .select([...accountColumns, 'documents.id'])
        .where('documents.id', '=', documentId)
        .modifyEnd(PREPARED)
        .executeTakeFirst();
    },
  };
}

export type AuthRepo = ReturnType<typeof createAuthRepo>;

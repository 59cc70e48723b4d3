import type { Selectable } from 'kysely';
import { pastCursor } from '../../db/keyset.ts';
import { lockNamed } from '../../db/transaction.ts';
import type { Executor, SourcesTable } from '../../db/types.ts';
import type { CursorPosition } from '../../lib/cursor.ts';

export type SourceRow = Omit<Selectable<SourcesTable>, 'account_id'>;

/** A source's own columns, as the settings API shows them. */
const SOURCE_COLUMNS = [
  'sources.id',
  'sources.name',
  'sources.success_url',
  'sources.error_url',
  'sources.allowed_origins',
  'sources.honeypot_field',
  'sources.rate_limit_per_minute',
  'sources.created_at',
] as const;

type SourceChanges = Partial<Omit<SourceRow, 'id' | 'created_at'>>;

function withTokenPrefix(tx: Executor, accountId: string) {
  return tx
    .selectFrom('sources')
    .leftJoin('source_tokens', (join) =>
      join
        .onRef('source_tokens.account_id', '=', 'sources.account_id')
        .onRef('source_tokens.source_id', '=', 'sources.id')
        .on('source_tokens.revoked_at', 'is', null),
    )
    .select([...SOURCE_COLUMNS, 'source_tokens.prefix as token_prefix'])
    .where('sources.account_id', '=', accountId);
}

export function createSourcesRepo(db: Executor) {
  return {
    insert(accountId: string, source: { id: string; name: string } & SourceChanges, tx: Executor = db) {
      return tx
        .insertInto('sources')
        .values({ ...source, account_id: accountId })
        .returning(SOURCE_COLUMNS)
        .executeTakeFirstOrThrow();
    },

    update(accountId: string, id: string, changes: SourceChanges, tx: Executor = db) {
      return tx
        .updateTable('sources')
        .set(changes)
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .executeTakeFirst();
    },

    /**
     * Serialises the naming of one account's sources (create, rename) until the transaction
     * ends: names are compared in the service, so two at once must not both find theirs free.
     */
    async lockNames(accountId: string, tx: Executor) {
      await lockNamed(tx, `sources:${accountId}`);
    },

    /** Every source's id and name, for the service to compare names as intake matches text. */
    names(accountId: string, tx: Executor = db) {
      return tx.selectFrom('sources').select(['id', 'name']).where('account_id', '=', accountId).execute();
    },

    find(accountId: string, id: string, tx: Executor = db) {
      return tx
        .selectFrom('sources')
        .select(['id', 'name', 'created_at'])
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .forUpdate()
        .executeTakeFirst();
    },

    /** One source with the display prefix of its active token, if any. */
    findWithToken(accountId: string, id: string, tx: Executor = db) {
      return withTokenPrefix(tx, accountId).where('sources.id', '=', id).executeTakeFirst();
    },

    /** Sources with the display prefix of their active token, if any. */
    list(accountId: string, limit: number, after: CursorPosition | null, tx: Executor = db) {
      let query = withTokenPrefix(tx, accountId);
      if (after) {
        query = query.where(
          pastCursor('sources.created_at', 'sources.id', 'after', after.createdAt, after.id),
        );
      }
      return query.orderBy('sources.created_at').orderBy('sources.id').limit(limit).execute();
    },

    revokeTokens(accountId: string, sourceId: string, tx: Executor = db) {
      return tx
        .updateTable('source_tokens')
        .set({ revoked_at: new Date() })
        .where('account_id', '=', accountId)
        .where('source_id', '=', sourceId)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
    },

    insertToken(
      accountId: string,
      token: { id: string; sourceId: string; prefix: string; tokenHash: Buffer },
      tx: Executor = db,
    ) {
      return tx
        .insertInto('source_tokens')
        .values({
          account_id: accountId,
          id: token.id,
          source_id: token.sourceId,
          prefix: token.prefix,
          token_hash: token.tokenHash,
        })
        .execute();
    },
  };
}

export type SourcesRepo = ReturnType<typeof createSourcesRepo>;

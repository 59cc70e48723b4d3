import type { Executor } from '../../db/types.ts';

export interface NewDocumentRow {
  id: string;
  field: string | null;
  name: string;
  mime: string;
  size: number;
  sha256: string;
  storageKey: string;
  sourceUrl: string;
}

export function createDocumentsRepo(db: Executor) {
  return {
    find(accountId: string, id: string, tx: Executor = db) {
      return tx
        .selectFrom('documents')
        .select(['id', 'record_id', 'field', 'name', 'mime', 'size', 'storage_key', 'created_at'])
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .executeTakeFirst();
    },

    async insert(accountId: string, recordId: string, rows: NewDocumentRow[], tx: Executor = db) {
      if (rows.length === 0) return;
      await tx
        .insertInto('documents')
        .values(
          rows.map((row) => ({
            account_id: accountId,
            id: row.id,
            record_id: recordId,
            field: row.field,
            name: row.name,
            mime: row.mime,
            size: row.size,
            sha256: row.sha256,
            storage_key: row.storageKey,
            source_url: row.sourceUrl,
          })),
        )
        .execute();
    },

    /** Removes the documents of one field of a record; returns their storage keys. */
    async removeFromField(
      accountId: string,
      recordId: string,
      field: string,
      tx: Executor = db,
    ): Promise<string[]> {
      const rows = await tx
        .deleteFrom('documents')
        .where('account_id', '=', accountId)
        .where('record_id', '=', recordId)
        .where('field', '=', field)
        .returning('storage_key')
        .execute();
      return rows.map((row) => row.storage_key);
    },
  };
}

export type DocumentsRepo = ReturnType<typeof createDocumentsRepo>;

import type { FileHandle } from 'node:fs/promises';
import fs from 'node:fs/promises';
import { Readable } from 'node:stream';
import type { Db } from '../db/types.ts';
import { checkStorageKey, createSpool, defaultSpoolDir, type FileStorage, missingFile } from './storage.ts';

/** Bytes per row of document_file_chunks: a download holds one chunk at a time. */
export const CHUNK_BYTES = 256 * 1024;

/** Fills `target` from the file at `position`; a file is read in pieces of whatever size the system gives. */
async function readFully(file: FileHandle, target: Buffer, position: number): Promise<void> {
  let filled = 0;
  while (filled < target.length) {
    const { bytesRead } = await file.read(target, filled, target.length - filled, position + filled);
    if (bytesRead === 0) throw new Error('a spooled file ended early');
    filled += bytesRead;
  }
}

export interface DatabaseStorageOptions {
  /** Where a file waits while it is read (`defaultSpoolDir()`). */
  spoolDir?: string;
}

/**
 * Document bytes in the database (LEADS_FILES_STORAGE=database), in the table
 * document_file_chunks (migration 0024), on PostgreSQL and the embedded database alike. A file
 * is read whole (within its limit) into a temporary file before its chunks are written in one
 * short transaction, so that no transaction waits on the network and a failed put writes
 * nothing; the transaction reads the file one chunk at a time, so that no document is held in
 * memory whole.
 */
export function createDatabaseStorage(db: Db, { spoolDir }: DatabaseStorageOptions = {}): FileStorage {
  const spool = createSpool(spoolDir ?? defaultSpoolDir());
  const chunkAt = async (accountId: string, key: string, seq: number) => {
    const row = await db
      .selectFrom('document_file_chunks')
      .select('bytes')
      .where('account_id', '=', accountId)
      .where('key', '=', key)
      .where('seq', '=', seq)
      .executeTakeFirst();
    return row ? Buffer.from(row.bytes.buffer, row.bytes.byteOffset, row.bytes.byteLength) : undefined;
  };

  return {
    async put(accountId, source, options) {
      const spooled = await spool(source, options);
      try {
        options.signal?.throwIfAborted();
        const { file } = spooled;
        const handle = await fs.open(spooled.path, 'r');
        try {
          await db.transaction().execute(async (tx) => {
            // An empty file is one empty chunk, so that opening it finds it.
            for (let seq = 0, at = 0; seq === 0 || at < file.size; seq++, at += CHUNK_BYTES) {
              const bytes = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, file.size - at));
              await readFully(handle, bytes, at);
              await tx
                .insertInto('document_file_chunks')
                .values({ account_id: accountId, key: file.key, seq, bytes })
                .execute();
            }
          });
        } finally {
          await handle.close();
        }
        return file;
      } finally {
        await spooled.discard();
      }
    },

    async open(accountId, key) {
      checkStorageKey(key);
      const first = await chunkAt(accountId, key, 0);
      if (!first) throw missingFile(key);
      return Readable.from(
        (async function* () {
          yield first;
          for (let seq = 1; ; seq++) {
            const next = await chunkAt(accountId, key, seq);
            if (!next) return;
            yield next;
          }
        })(),
        { objectMode: false },
      );
    },

    async remove(accountId, key) {
      await db
        .deleteFrom('document_file_chunks')
        .where('account_id', '=', accountId)
        .where('key', '=', checkStorageKey(key))
        .execute();
    },
  };
}

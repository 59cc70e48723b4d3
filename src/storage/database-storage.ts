import { Readable } from 'node:stream';
import type { Db } from '../db/types.ts';
import { checkStorageKey, type FileStorage, missingFile, readWhole } from './storage.ts';

/** Bytes per row of document_file_chunks: a download holds one chunk at a time. */
export const CHUNK_BYTES = 256 * 1024;

/** The chunks' bytes cut into pieces of `size` (the last shorter); an empty file is one empty piece. */
function* pieces(chunks: Buffer[], size: number): Generator<Buffer> {
  let pending: Buffer[] = [];
  let length = 0;
  let yielded = false;
  for (let chunk of chunks) {
    while (length + chunk.length >= size) {
      const take = size - length;
      pending.push(chunk.subarray(0, take));
      yield Buffer.concat(pending, size);
      yielded = true;
      chunk = chunk.subarray(take);
      pending = [];
      length = 0;
    }
    if (chunk.length > 0) {
      pending.push(chunk);
      length += chunk.length;
    }
  }
  if (length > 0 || !yielded) yield Buffer.concat(pending, length);
}

/**
 * Document bytes in the database (LEADS_FILES_STORAGE=database), in the table
 * document_file_chunks (migration 0024), on PostgreSQL and the embedded database alike. A file
 * is read whole (within its limit) before its chunks are written in one short transaction, so
 * that no transaction waits on the network and a failed put writes nothing.
 */
export function createDatabaseStorage(db: Db): FileStorage {
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
      const { chunks, file } = await readWhole(source, options);
      options.signal?.throwIfAborted();
      await db.transaction().execute(async (tx) => {
        let seq = 0;
        for (const bytes of pieces(chunks, CHUNK_BYTES)) {
          await tx
            .insertInto('document_file_chunks')
            .values({ account_id: accountId, key: file.key, seq: seq++, bytes })
            .execute();
        }
      });
      return file;
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

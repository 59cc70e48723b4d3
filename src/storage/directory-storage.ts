import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { checkStorageKey, createMeter, type FileStorage, newStorageKey } from './storage.ts';

/**
 * Document bytes in a directory on disk (LEADS_FILES_DIR): `<2 hex>/<uuid>`, whatever the
 * account (the account is the document row's).
 */
export function createDirectoryStorage(root: string): FileStorage {
  const tmpDir = path.join(root, 'tmp');
  const pathOf = (key: string) => path.join(root, checkStorageKey(key));

  return {
    /** Streams into a temporary file while counting and hashing, then moves it into place. */
    async put(_accountId, source, { maxBytes, signal }) {
      await fs.mkdir(tmpDir, { recursive: true });
      const key = newStorageKey();
      const tmpPath = path.join(tmpDir, path.basename(key));
      const meter = createMeter(maxBytes);
      // The file exists before any byte flows: a write stream that opened it by path could
      // create it after a failed pipeline had already removed it, leaving it behind.
      const file = await fs.open(tmpPath, 'wx');
      try {
        await pipeline(source, meter.count, file.createWriteStream(), { signal });
        const finalPath = pathOf(key);
        await fs.mkdir(path.dirname(finalPath), { recursive: true });
        await fs.rename(tmpPath, finalPath);
        return meter.result(key);
      } catch (error) {
        await file.close().catch(() => {});
        await fs.rm(tmpPath, { force: true });
        throw error;
      }
    },

    async open(_accountId, key) {
      const filePath = pathOf(key);
      await fs.access(filePath);
      return createReadStream(filePath);
    },

    async remove(_accountId, key) {
      await fs.rm(pathOf(key), { force: true });
    },
  };
}

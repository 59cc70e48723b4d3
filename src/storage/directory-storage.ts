import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { checkStorageKey, type FileStorage, writeNewFile } from './storage.ts';

/**
 * Document bytes in a directory on disk (LEADS_FILES_DIR): `<2 hex>/<uuid>`, whatever the
 * account (the account is the document row's).
 */
export function createDirectoryStorage(root: string): FileStorage {
  const tmpDir = path.join(root, 'tmp');
  const pathOf = (key: string) => path.join(root, checkStorageKey(key));

  return {
    /** Streams into a temporary file while counting and hashing, then moves it into place. */
    async put(_accountId, source, options) {
      await fs.mkdir(tmpDir, { recursive: true });
      const { path: tmpPath, file } = await writeNewFile(tmpDir, source, options);
      try {
        const finalPath = pathOf(file.key);
        await fs.mkdir(path.dirname(finalPath), { recursive: true });
        await fs.rename(tmpPath, finalPath);
        return file;
      } catch (error) {
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

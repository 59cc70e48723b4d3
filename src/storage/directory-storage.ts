import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/** Keys are generated here and nothing else is accepted, so no key can leave the directory. */
const KEY_PATTERN = /^[0-9a-f]{2}\/[0-9a-f-]{36}$/;

export class TooLargeError extends Error {
  constructor(limit: number) {
    super(`more than ${limit} bytes`);
    this.name = 'TooLargeError';
  }
}

export interface StoredFile {
  key: string;
  size: number;
  sha256: string;
  /** Where the bytes are, for sniffing before anything else reads them. */
  path: string;
}

/** Where document bytes live (decisions §1): a directory on disk. */
export interface FileStorage {
  /** Streams into a temporary file while counting and hashing, then moves it into place. */
  put(source: Readable, options: { maxBytes: number; signal?: AbortSignal }): Promise<StoredFile>;
  open(key: string): Promise<Readable>;
  remove(key: string): Promise<void>;
}

export function createDirectoryStorage(root: string): FileStorage {
  const tmpDir = path.join(root, 'tmp');
  const pathOf = (key: string) => {
    if (!KEY_PATTERN.test(key)) throw new Error('not a storage key');
    return path.join(root, key);
  };

  return {
    async put(source, { maxBytes, signal }) {
      await fs.mkdir(tmpDir, { recursive: true });
      const id = randomUUID();
      const key = `${id.slice(0, 2)}/${id}`;
      const tmpPath = path.join(tmpDir, id);
      const hash = createHash('sha256');
      let size = 0;
      // The file exists before any byte flows: a write stream that opened it by path could
      // create it after a failed pipeline had already removed it, leaving it behind.
      const file = await fs.open(tmpPath, 'wx');
      try {
        await pipeline(
          source,
          async function* count(chunks: AsyncIterable<Buffer>) {
            for await (const chunk of chunks) {
              size += chunk.length;
              if (size > maxBytes) throw new TooLargeError(maxBytes);
              hash.update(chunk);
              yield chunk;
            }
          },
          file.createWriteStream(),
          { signal },
        );
        const finalPath = pathOf(key);
        await fs.mkdir(path.dirname(finalPath), { recursive: true });
        await fs.rename(tmpPath, finalPath);
        return { key, size, sha256: hash.digest('hex'), path: finalPath };
      } catch (error) {
        await file.close().catch(() => {});
        await fs.rm(tmpPath, { force: true });
        throw error;
      }
    },

    async open(key) {
      const filePath = pathOf(key);
      await fs.access(filePath);
      return createReadStream(filePath);
    },

    async remove(key) {
      await fs.rm(pathOf(key), { force: true });
    },
  };
}

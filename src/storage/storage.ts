import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/** How many of a file's first bytes `put` hands back, for recognising its type. */
export const HEAD_BYTES = 64 * 1024;

/** Keys are generated here and nothing else is accepted, so no key can leave its place. */
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
  /** The first bytes (up to HEAD_BYTES), so that the type is read without reading the file again. */
  head: Buffer;
}

export interface PutOptions {
  maxBytes: number;
  signal?: AbortSignal;
}

/**
 * Where document bytes live (decisions §1): a directory on disk, the database, or an
 * S3-compatible bucket (LEADS_FILES_STORAGE). Each file belongs to one account; a put that fails,
 * is aborted or passes `maxBytes` leaves nothing behind.
 */
export interface FileStorage {
  put(accountId: string, source: Readable, options: PutOptions): Promise<StoredFile>;
  open(accountId: string, key: string): Promise<Readable>;
  remove(accountId: string, key: string): Promise<void>;
}

/** What `open` throws for a key that holds nothing, whichever the store (as the file system's ENOENT). */
export function missingFile(key: string): Error {
  return Object.assign(new Error(`no stored file ${key}`), { code: 'ENOENT' });
}

/** A new storage key: `<2 hex>/<uuid>`. */
export function newStorageKey(): string {
  const id = randomUUID();
  return `${id.slice(0, 2)}/${id}`;
}

/** Refuses anything that is not a key `newStorageKey` made. */
export function checkStorageKey(key: string): string {
  if (!KEY_PATTERN.test(key)) throw new Error('not a storage key');
  return key;
}

/**
 * Counts, hashes and keeps the head of the bytes that pass through `meter.count`; passing
 * `maxBytes` fails the stream with TooLargeError.
 */
function createMeter(maxBytes: number) {
  const hash = createHash('sha256');
  const head: Buffer[] = [];
  let headLength = 0;
  let size = 0;
  return {
    async *count(chunks: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
      for await (const chunk of chunks) {
        size += chunk.length;
        if (size > maxBytes) throw new TooLargeError(maxBytes);
        hash.update(chunk);
        if (headLength < HEAD_BYTES) {
          const part = chunk.subarray(0, HEAD_BYTES - headLength);
          head.push(part);
          headLength += part.length;
        }
        yield chunk;
      }
    },
    /** What passed, once the stream ended. */
    result(key: string): StoredFile {
      return { key, size, sha256: hash.digest('hex'), head: Buffer.concat(head, headLength) };
    },
  };
}

/**
 * Streams a source into a new file of `dir`, named after a new storage key, while counting and
 * hashing it; a source that fails, is aborted or passes `maxBytes` leaves no file behind.
 */
export async function writeNewFile(
  dir: string,
  source: Readable,
  { maxBytes, signal }: PutOptions,
): Promise<{ path: string; file: StoredFile }> {
  const key = newStorageKey();
  const filePath = path.join(dir, path.basename(key));
  const meter = createMeter(maxBytes);
  // The file exists before any byte flows: a write stream that opened it by path could create
  // it after a failed pipeline had already removed it, leaving it behind.
  const handle = await fs.open(filePath, 'wx');
  try {
    await pipeline(source, meter.count, handle.createWriteStream(), { signal });
  } catch (error) {
    await handle.close().catch(() => {});
    await fs.rm(filePath, { force: true });
    throw error;
  }
  return { path: filePath, file: meter.result(key) };
}

/** Where stores that write a file in one go (database, S3) keep it meanwhile, unless told otherwise. */
export function defaultSpoolDir(): string {
  return path.join(os.tmpdir(), 'leadline-spool');
}

/** A spooled file older than this is a leftover of a process that stopped during a put. */
const SPOOL_LEFTOVER_MS = 60 * 60 * 1000;

/** A whole source in a temporary file, counted and hashed; `discard` removes the file. */
export interface Spooled {
  path: string;
  file: StoredFile;
  discard(): Promise<void>;
}

/**
 * Keeps whole sources in temporary files of `dir`, for stores that write a file in one go
 * (database, S3): a document of up to its limit (25 MB) is never held in memory, so that
 * documents fetched at once cannot take the process's memory. The limit stops the read as soon
 * as it is passed; a read that fails, is aborted or passes the limit leaves no file behind.
 * Files a stopped process left (older than an hour) are removed at a spool, at most once an hour
 * per process.
 */
export function createSpool(dir: string, clock: () => number = Date.now) {
  let created: Promise<unknown> | undefined;
  let sweptAt = Number.NEGATIVE_INFINITY;
  const sweep = async (now: number) => {
    for (const name of await fs.readdir(dir)) {
      const file = path.join(dir, name);
      const stat = await fs.stat(file).catch(() => undefined);
      if (stat?.isFile() && stat.mtimeMs < now - SPOOL_LEFTOVER_MS) await fs.rm(file, { force: true });
    }
  };

  return async function spool(source: Readable, options: PutOptions): Promise<Spooled> {
    created ??= fs.mkdir(dir, { recursive: true }).catch((error: unknown) => {
      created = undefined;
      throw error;
    });
    await created;
    const now = clock();
    if (now - sweptAt >= SPOOL_LEFTOVER_MS) {
      sweptAt = now;
      // Housekeeping: a directory that cannot be read fails the put below, not here.
      await sweep(now).catch(() => {});
    }
    const { path: spoolPath, file } = await writeNewFile(dir, source, options);
    return { path: spoolPath, file, discard: () => fs.rm(spoolPath, { force: true }) };
  };
}

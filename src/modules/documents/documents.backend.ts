import type { Config } from '../../config.ts';
import type { Db } from '../../db/types.ts';
import { type AddressPolicy, createAddressPolicy, type Resolver } from '../../outbound/address-policy.ts';
import { createGuardedFetcher } from '../../outbound/guarded-fetch.ts';
import { createDatabaseStorage } from '../../storage/database-storage.ts';
import { createDirectoryStorage } from '../../storage/directory-storage.ts';
import { createS3Storage, type S3Settings } from '../../storage/s3-storage.ts';
import type { FileStorage } from '../../storage/storage.ts';
import { createDocumentFetcher, MAX_DOCUMENT_BYTES } from './documents.fetch.ts';
import type { DocumentStorage, FetchDocument } from './documents.service.ts';

/** Where document bytes are kept (LEADS_FILES_STORAGE, decisions §1). */
export type FilesStore =
  | { kind: 'directory'; dir: string }
  | { kind: 'database'; db: Db }
  | { kind: 's3'; s3: S3Settings };

/** The store the settings chose (LEADS_FILES_STORAGE). */
export function filesStoreFor(config: Pick<Config, 'filesStorage' | 'filesDir' | 's3'>, db: Db): FilesStore {
  if (config.filesStorage === 'database') return { kind: 'database', db };
  if (config.filesStorage === 's3') {
    if (!config.s3) throw new Error('LEADS_FILES_STORAGE=s3 needs its S3 settings');
    return { kind: 's3', s3: config.s3 };
  }
  return { kind: 'directory', dir: config.filesDir };
}

export interface DocumentBackendOptions {
  /** A directory on disk by default (LEADS_FILES_DIR). */
  files: FilesStore;
  allowPrivate: boolean;
  /** Limits, replaceable so that tests use small ones. */
  maxBytes?: number;
  timeoutMs?: number;
  policy?: AddressPolicy;
  resolve?: Resolver;
  /** Told of a store that failed to keep a fetched document (the operator's log). */
  onStorageError?: (error: unknown) => void;
}

export function createFileStorage(files: FilesStore): FileStorage {
  if (files.kind === 'database') return createDatabaseStorage(files.db);
  if (files.kind === 's3') return createS3Storage(files.s3);
  return createDirectoryStorage(files.dir);
}

/** Document storage and the guarded fetcher that fills it. */
export function createDocumentBackend(options: DocumentBackendOptions): {
  storage: DocumentStorage;
  fetchDocument: FetchDocument;
} {
  const storage = createFileStorage(options.files);
  const fetcher = createGuardedFetcher({
    allowPrivate: options.allowPrivate,
    policy: options.policy ?? createAddressPolicy(options.allowPrivate),
    resolve: options.resolve,
    timeoutMs: options.timeoutMs ?? 30_000,
  });
  return {
    storage,
    fetchDocument: createDocumentFetcher({
      fetcher,
      storage,
      maxBytes: options.maxBytes ?? MAX_DOCUMENT_BYTES,
      onStorageError: options.onStorageError,
    }),
  };
}

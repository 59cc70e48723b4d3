import { type AddressPolicy, createAddressPolicy, type Resolver } from '../../outbound/address-policy.ts';
import { createGuardedFetcher } from '../../outbound/guarded-fetch.ts';
import { createDirectoryStorage } from '../../storage/directory-storage.ts';
import { createDocumentFetcher, MAX_DOCUMENT_BYTES } from './documents.fetch.ts';
import type { DocumentStorage, FetchDocument } from './documents.service.ts';

export interface DocumentBackendOptions {
  filesDir: string;
  allowPrivate: boolean;
  /** Limits, replaceable so that tests use small ones. */
  maxBytes?: number;
  timeoutMs?: number;
  policy?: AddressPolicy;
  resolve?: Resolver;
}

/** Document storage on disk and the guarded fetcher that fills it. */
export function createDocumentBackend(options: DocumentBackendOptions): {
  storage: DocumentStorage;
  fetchDocument: FetchDocument;
} {
  const storage = createDirectoryStorage(options.filesDir);
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
    }),
  };
}

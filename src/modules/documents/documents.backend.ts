import type { DocumentStorage, FetchDocument } from './documents.service.ts';

export interface DocumentBackendOptions {
  filesDir: string;
  allowPrivate: boolean;
}

/** Storage and guarded fetcher for documents. PENDING: replaced by src/storage + src/outbound. */
export function createDocumentBackend(_options: DocumentBackendOptions): {
  storage: DocumentStorage;
  fetchDocument: FetchDocument;
} {
  const unavailable = async (): Promise<never> => {
    throw new Error('document backend not wired yet');
  };
  return { storage: { open: unavailable, remove: unavailable }, fetchDocument: unavailable };
}

import { TextDecoder } from 'node:util';
import { type GuardedFetcher, OutboundError } from '../../outbound/guarded-fetch.ts';
import { type FileStorage, HEAD_BYTES, TooLargeError } from '../../storage/storage.ts';
import type { FetchDocument, FetchResult } from './documents.service.ts';

/** 25 MiB per document (decisions §4). */
export const MAX_DOCUMENT_BYTES = 25 * 1024 * 1024;
const MAX_NAME_LENGTH = 200;

/**
 * A file name safe to store and to send back: no paths, no control characters (NUL included),
 * no unpaired surrogates, at most 200 characters (code points, so no pair is cut in two).
 */
export function sanitizeFileName(raw: string): string {
  const base = raw.split(/[/\\]/).pop() ?? '';
  const printable = [...base].filter((char) => {
    const code = char.codePointAt(0) ?? 0;
    const control = code <= 0x1f || (code >= 0x7f && code <= 0x9f);
    const unpairedSurrogate = code >= 0xd800 && code <= 0xdfff;
    return !control && !unpairedSurrogate;
  });
  const cleaned = [...printable.join('').replace(/^\.+/, '').trim()].slice(0, MAX_NAME_LENGTH).join('');
  return cleaned === '' ? 'document' : cleaned;
}

/** The file name from Content-Disposition (RFC 6266, `filename*` first), else from the URL path. */
export function fileNameFor(url: URL, contentDisposition: string | undefined): string {
  if (contentDisposition) {
    const extended = /filename\*\s*=\s*(?:UTF-8|utf-8)''([^;]+)/.exec(contentDisposition);
    if (extended?.[1]) {
      try {
        return sanitizeFileName(decodeURIComponent(extended[1].trim()));
      } catch {
        // Malformed escape: fall through to the plain parameter.
      }
    }
    const plain = /filename\s*=\s*("([^"]*)"|[^;]+)/.exec(contentDisposition);
    const value = plain?.[2] ?? plain?.[1];
    if (value) return sanitizeFileName(value.trim());
  }
  const segment = url.pathname.split('/').filter(Boolean).pop() ?? '';
  try {
    return sanitizeFileName(decodeURIComponent(segment));
  } catch {
    return sanitizeFileName(segment);
  }
}

/** file-type is loaded with the first document fetched, not with the service. */
let fileTypeLoading: Promise<typeof import('file-type')> | undefined;

/**
 * The media type from the bytes (decisions §4), never from what the sender claimed: `head` is the
 * file's first HEAD_BYTES (all of it when shorter), as storage's `put` hands them back.
 */
export async function sniffMediaType(head: Buffer): Promise<string> {
  fileTypeLoading ??= import('file-type');
  const { fileTypeFromBuffer } = await fileTypeLoading;
  const detected = await fileTypeFromBuffer(head);
  if (detected) return detected.mime;
  if (head.length > 0 && !head.includes(0)) {
    try {
      // A cut at the end of the sample may split a character: `stream` tolerates that.
      new TextDecoder('utf-8', { fatal: true }).decode(head, { stream: head.length === HEAD_BYTES });
      return 'text/plain';
    } catch {
      // Not UTF-8 text.
    }
  }
  return 'application/octet-stream';
}

/** The download's time ran out (the guarded fetcher aborts it). */
function isAbort(error: unknown): boolean {
  return (
    (error as { name?: string }).name === 'AbortError' ||
    (error as { code?: string }).code === 'UND_ERR_ABORTED'
  );
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** Fetches one document URL into storage through the guarded fetcher; failures become reasons. */
export function createDocumentFetcher({
  fetcher,
  storage,
  maxBytes = MAX_DOCUMENT_BYTES,
  onStorageError,
}: {
  fetcher: GuardedFetcher;
  storage: FileStorage;
  maxBytes?: number;
  /** Told of a store that failed to keep a fetched document: the operator's problem, not the sender's. */
  onStorageError?: (error: unknown) => void;
}): FetchDocument {
  return async (accountId: string, url: string): Promise<FetchResult> => {
    let opened: Awaited<ReturnType<GuardedFetcher['open']>> | undefined;
    // Whether the download itself failed: an error out of `put` is the store's otherwise.
    let downloadFailed = false;
    try {
      opened = await fetcher.open(url);
      if (opened.status < 200 || opened.status > 299) return { ok: false, reason: `http_${opened.status}` };
      const announced = Number(headerValue(opened.headers['content-length']));
      if (Number.isFinite(announced) && announced > maxBytes) return { ok: false, reason: 'too_large' };
      opened.body.once('error', () => {
        downloadFailed = true;
      });
      let stored: Awaited<ReturnType<FileStorage['put']>>;
      try {
        stored = await storage.put(accountId, opened.body, { maxBytes });
      } catch (error) {
        if (downloadFailed || error instanceof TooLargeError || isAbort(error)) throw error;
        onStorageError?.(error);
        return { ok: false, reason: 'storage_error' };
      }
      try {
        const mime = await sniffMediaType(stored.head);
        const name = fileNameFor(opened.url, headerValue(opened.headers['content-disposition']));
        return {
          ok: true,
          document: { name, mime, size: stored.size, sha256: stored.sha256, storageKey: stored.key },
        };
      } catch (error) {
        await storage.remove(accountId, stored.key);
        throw error;
      }
    } catch (error) {
      if (error instanceof OutboundError) return { ok: false, reason: error.reason };
      if (error instanceof TooLargeError) return { ok: false, reason: 'too_large' };
      const cause = (error as { cause?: unknown }).cause;
      if (cause instanceof OutboundError) return { ok: false, reason: cause.reason };
      if (isAbort(error)) return { ok: false, reason: 'timeout' };
      return { ok: false, reason: 'network_error' };
    } finally {
      await opened?.close();
    }
  };
}

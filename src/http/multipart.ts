import { Busboy, type BusboyFileStream } from '@fastify/busboy';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { SINGLE_BODY_LIMIT } from './body-limits.ts';
import { AppError } from './errors.ts';

/**
 * `multipart/form-data` bodies (decisions §13), parsed with busboy as they stream: text parts
 * become a flat object like a url-encoded form's (repeated names give lists), and file parts are
 * read to their end and discarded, never kept: files are only taken by URL (interface rule 4).
 * Their names are left on the request, so that the route can say what it did not take.
 */

declare module 'fastify' {
  interface FastifyRequest {
    /** Names of the file parts of a multipart body that were discarded, in order. */
    discardedFileParts: string[] | null;
  }
}

export const MULTIPART = 'multipart/form-data';
/** A file part is read up to this size and discarded; a larger one refuses the body. */
export const FILE_PART_LIMIT = 25 * 1024 * 1024;
/** File parts in one body; more refuse it, so that one post cannot stream unbounded data. */
export const FILE_PARTS_MAX = 20;
/** Parts of any kind in one body (the record body takes at most 600 keys). */
const PARTS_MAX = 1000;
/** A part name: a field key of 100 characters in `fields[…]`, UTF-8, with room to spare. */
const PART_NAME_BYTES = 1024;

const tooLarge = (message: string) => new AppError('payload_too_large', { message });
const malformed = (message: string) => new AppError('invalid_body', { message });

function append(body: Record<string, string | string[]>, name: string, value: string) {
  const existing = body[name];
  if (existing === undefined) body[name] = value;
  else if (Array.isArray(existing)) existing.push(value);
  else body[name] = [existing, value];
}

/** Reads one multipart body; text parts (names and values) count against `textLimit` bytes. */
export function readMultipart(
  request: FastifyRequest,
  payload: NodeJS.ReadableStream,
  textLimit = SINGLE_BODY_LIMIT,
): Promise<Record<string, string | string[]>> {
  return new Promise((resolve, reject) => {
    // Null prototype: a part named `__proto__` or `constructor` is data like any other.
    const body: Record<string, string | string[]> = Object.create(null);
    const discarded: string[] = [];
    let textBytes = 0;
    let failure: AppError | null = null;
    let settled = false;

    const finish = (error: unknown) => {
      if (settled) return;
      settled = true;
      payload.unpipe(parser);
      if (error) {
        // The rest of the body is read and dropped, so that the answer reaches the client.
        payload.resume();
        reject(error);
      } else {
        request.discardedFileParts = discarded;
        resolve(body);
      }
    };
    const fail = (error: AppError) => {
      failure ??= error;
      finish(failure);
    };

    let parser: ReturnType<typeof Busboy>;
    try {
      parser = Busboy({
        headers: request.headers as Parameters<typeof Busboy>[0]['headers'],
        limits: {
          fieldNameSize: PART_NAME_BYTES,
          fieldSize: textLimit,
          fileSize: FILE_PART_LIMIT,
          files: FILE_PARTS_MAX,
          parts: PARTS_MAX,
        },
      });
    } catch (error) {
      // No boundary, or a content type busboy cannot read.
      reject(malformed(error instanceof Error ? error.message : 'not a multipart body'));
      return;
    }

    // busboy decodes names and values as UTF-8 (or a part's charset); bytes that are not
    // UTF-8 become U+FFFD, as a browser shows them, never text PostgreSQL cannot store.
    parser.on('field', (name, value, nameTruncated, valueTruncated) => {
      if (settled) return;
      if (nameTruncated) return fail(malformed('a part name is too long'));
      if (valueTruncated) return fail(tooLarge('The text parts of the body are too large'));
      textBytes += Buffer.byteLength(name) + Buffer.byteLength(value);
      if (textBytes > textLimit) return fail(tooLarge('The text parts of the body are too large'));
      append(body, name, value);
    });
    parser.on('file', (name: string, stream: BusboyFileStream) => {
      stream.on('limit', () => fail(tooLarge('A file part is larger than 25 MiB')));
      stream.on('error', (error: unknown) =>
        fail(malformed(error instanceof Error ? error.message : 'malformed file part')),
      );
      // Read to the end and drop: the bytes are never kept.
      stream.resume();
      if (!settled) discarded.push(name);
    });
    parser.on('partsLimit', () => fail(tooLarge(`More than ${PARTS_MAX} parts`)));
    parser.on('filesLimit', () => fail(tooLarge(`More than ${FILE_PARTS_MAX} file parts`)));
    parser.on('error', (error: unknown) =>
      fail(malformed(error instanceof Error ? error.message : 'malformed multipart body')),
    );
    parser.on('finish', () => finish(failure));
    payload.on('error', (error) => finish(error));
    payload.pipe(parser);
  });
}

/** Registers the multipart parser; routes that do not list it refuse it first (http/validation.ts). */
export function registerMultipart(app: FastifyInstance): void {
  app.decorateRequest('discardedFileParts', null);
  app.addContentTypeParser(MULTIPART, (request: FastifyRequest, payload: NodeJS.ReadableStream) =>
    readMultipart(request, payload),
  );
}

import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { Db, Executor } from '../../db/types.ts';
import { AppError } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import { mapLimited } from '../../lib/concurrency.ts';
import type { OutboundService } from '../../outbound/outbound.service.ts';
import { documentSignature, SIGNED_URL_TTL_SECONDS } from '../auth/auth.service.ts';
import { type EntityDef, isFileType } from '../entities/entities.model.ts';
import type { EntitiesService } from '../entities/entities.service.ts';
import type { Warning } from '../intake/intake.service.ts';
import type { RecordsRepo } from '../records/records.repo.ts';
import type { DocumentsRepo } from './documents.repo.ts';

/** At most this many documents per call (decisions §4). */
export const MAX_DOCUMENTS_PER_CALL = 20;
/** Documents of one call are fetched this many at a time. */
const FETCH_CONCURRENCY = 4;

export interface DocumentRef {
  url: string;
  name?: string;
  field?: string;
}

/** The keys a document reference takes; any other is an `unmapped` warning (intake and record PATCH). */
export const DOCUMENT_REF_KEYS: ReadonlySet<string> = new Set(['url', 'name', 'field']);

/** A document fetched into storage, not yet attached to a record. */
export interface StoredDocument {
  name: string;
  mime: string;
  size: number;
  sha256: string;
  storageKey: string;
}

export type FetchResult = { ok: true; document: StoredDocument } | { ok: false; reason: string };

/** Fetches one URL into the account's storage through the guarded fetcher. */
export type FetchDocument = (accountId: string, url: string) => Promise<FetchResult>;

export interface DocumentStorage {
  open(accountId: string, key: string): Promise<Readable>;
  remove(accountId: string, key: string): Promise<void>;
}

/** Documents fetched for one call, with the field each lands on (null: the record's pool). */
export interface FetchedBatch {
  /** The account whose storage holds the fetched files. */
  accountId: string;
  items: { field: string | null; sourceUrl: string; document: StoredDocument }[];
  warnings: Warning[];
}

export interface AttachContext {
  accountId: string;
  actor: string;
  requestId: string;
  /** Documents handed over with a new record: its `record.created` webhook stands for them. */
  newRecord?: boolean;
}

export interface DocumentsServiceDeps {
  db: Db;
  entities: EntitiesService;
  records: RecordsRepo;
  repo: DocumentsRepo;
  storage: DocumentStorage;
  fetchDocument: FetchDocument;
  secret: string;
  /** The absolute base of links, read when a link is made (the bound port is known only then). */
  currentPublicUrl: () => string;
  /** Account webhooks: `document.attached` is written with the documents. */
  outbound: Pick<OutboundService, 'emitEvent'>;
  now?: () => Date;
}

/** The keys of an entity's `file` fields: each holds one document (a `files` field collects). */
function singleFileFieldsOf(entity: EntityDef | undefined): Set<string> {
  return new Set((entity?.fields ?? []).filter((field) => field.type === 'file').map((field) => field.key));
}

export function createDocumentsService(deps: DocumentsServiceDeps) {
  const {
    db,
    entities,
    records,
    repo,
    storage,
    fetchDocument,
    secret,
    currentPublicUrl,
    outbound,
    now = () => new Date(),
  } = deps;

  /**
   * Decides where each document goes and fetches the allowed ones. `scope` (record tokens)
   * limits the file fields; `allowPool` says whether a document without a field may go to the
   * record's pool. A document that cannot be fetched becomes a `document_unavailable` warning.
   */
  async function fetchFor(
    accountId: string,
    entityKeyOrId: string,
    refs: DocumentRef[],
    options: { scope: string[] | null; allowPool: boolean },
  ): Promise<FetchedBatch> {
    if (refs.length > MAX_DOCUMENTS_PER_CALL) {
      throw new AppError('validation_failed', {
        details: [
          {
            key: 'documents',
            reason: 'too_many',
            message: `at most ${MAX_DOCUMENTS_PER_CALL} documents per call`,
          },
        ],
      });
    }
    const entity = await entities.find(accountId, entityKeyOrId);
    if (!entity) throw new AppError('not_found', { message: 'Record not found' });
    const fileFields = entity.fields.filter((field) => isFileType(field.type)).map((field) => field.key);
    const openFileFields = options.scope
      ? fileFields.filter((key) => options.scope!.includes(key))
      : fileFields;
    // A `file` field holds one document: a call naming it twice is refused (which one was meant
    // is the sender's to say), before anything is fetched.
    const singleFileFields = singleFileFieldsOf(entity);
    const singleFieldNamedAt = new Map<string, number>();
    const warnings: Warning[] = [];
    const planned: { ref: DocumentRef; field: string | null }[] = [];
    for (const [index, ref] of refs.entries()) {
      let field: string | null = ref.field ?? null;
      if (field === null && !options.allowPool) {
        if (openFileFields.length === 1) field = openFileFields[0]!;
        else if (openFileFields.length > 1) {
          throw new AppError('validation_failed', {
            details: [
              {
                key: `documents.${index}.field`,
                reason: 'required',
                message: 'the token opens several file fields: name one',
              },
            ],
          });
        } else {
          warnings.push({ key: ref.url, reason: 'not_in_scope', message: 'the token opens no file field' });
          continue;
        }
      }
      if (field !== null) {
        if (!fileFields.includes(field)) {
          throw new AppError('validation_failed', {
            details: [
              {
                key: `documents.${index}.field`,
                reason: 'not_allowed',
                message: `${field} is not a file field`,
              },
            ],
          });
        }
        if (!openFileFields.includes(field)) {
          warnings.push({ key: field, reason: 'not_in_scope' });
          continue;
        }
        const earlier = singleFieldNamedAt.get(field);
        if (earlier !== undefined) {
          throw new AppError('validation_failed', {
            details: [
              {
                key: `documents.${index}.field`,
                reason: 'too_many',
                message: `${field} holds one document, and documents.${earlier} goes there too`,
              },
            ],
          });
        }
        if (singleFileFields.has(field)) singleFieldNamedAt.set(field, index);
      }
      planned.push({ ref, field });
    }
    const results = await mapLimited(planned, FETCH_CONCURRENCY, (item) =>
      fetchDocument(accountId, item.ref.url),
    );
    const items: FetchedBatch['items'] = [];
    for (const [index, result] of results.entries()) {
      const { ref, field } = planned[index]!;
      if (result.ok) {
        items.push({
          field,
          sourceUrl: ref.url,
          document: ref.name ? { ...result.document, name: ref.name } : result.document,
        });
      } else {
        warnings.push({ key: field ?? ref.url, reason: 'document_unavailable', message: result.reason });
      }
    }
    return { accountId, items, warnings };
  }

  return {
    fetchFor,

    async fetchForRecord(
      accountId: string,
      recordId: string,
      refs: DocumentRef[],
      options: { scope: string[] | null; allowPool: boolean },
    ): Promise<FetchedBatch> {
      const record = await records.find(accountId, recordId);
      if (!record) throw new AppError('not_found', { message: 'Record not found' });
      return fetchFor(accountId, record.entity_id, refs, options);
    },

    /** Writes the fetched documents onto the record, in the caller's transaction if given. */
    async attach(ctx: AttachContext, recordId: string, batch: FetchedBatch, tx?: Executor): Promise<number> {
      if (batch.items.length === 0) return 0;
      const write = async (executor: Executor) => {
        // A single-file field holds one document: the new one replaces what it had.
        const entityRecord = await records.find(ctx.accountId, recordId, executor);
        const entity = entityRecord && (await entities.find(ctx.accountId, entityRecord.entity_id, executor));
        const singleFields = singleFileFieldsOf(entity);
        const unusedFiles: string[] = [];
        for (const field of new Set(batch.items.map((item) => item.field))) {
          if (field && singleFields.has(field)) {
            unusedFiles.push(...(await repo.removeFromField(ctx.accountId, recordId, field, executor)));
          }
        }
        // fetchFor refuses two documents for one single-file field; a field that became one
        // since the fetch (an entity changed meanwhile) keeps the last, and the others' files go.
        const kept = batch.items.filter(
          (item, index) =>
            !(
              item.field &&
              singleFields.has(item.field) &&
              batch.items.findLastIndex((i) => i.field === item.field) !== index
            ),
        );
        for (const item of batch.items) if (!kept.includes(item)) unusedFiles.push(item.document.storageKey);
        const rows = kept.map((item) => ({
          id: randomUUID(),
          field: item.field,
          sourceUrl: item.sourceUrl,
          ...item.document,
        }));
        await repo.insert(ctx.accountId, recordId, rows, executor);
        await records.insertEvents(
          ctx.accountId,
          rows.map((row) => ({
            recordId,
            type: 'document_attached',
            message: `${row.name} (${row.mime}, ${row.size} bytes)${row.field ? ` to ${row.field}` : ''}`,
            actor: ctx.actor,
            data: { document_id: row.id, field: row.field, request_id: ctx.requestId },
          })),
          executor,
        );
        if (!ctx.newRecord) {
          await records.touch(ctx.accountId, recordId, executor);
          for (const row of rows) {
            await outbound.emitEvent(executor, ctx.accountId, 'document.attached', {
              record_id: recordId,
              document: { id: row.id, name: row.name, mime: row.mime, size: row.size, field: row.field },
            });
          }
        }
        return { count: rows.length, unusedFiles };
      };
      const { count, unusedFiles } = tx ? await write(tx) : await db.transaction().execute(write);
      // The files of replaced and unkept documents go once the new ones are committed.
      for (const key of unusedFiles) await storage.remove(ctx.accountId, key).catch(() => {});
      return count;
    },

    /** Drops fetched files that were never attached (the write that would have used them failed). */
    async discard(batch: FetchedBatch | null): Promise<void> {
      if (!batch) return;
      for (const item of batch.items)
        await storage.remove(batch.accountId, item.document.storageKey).catch(() => {});
    },

    async open(accountId: string, documentId: string) {
      const row = await repo.find(accountId, documentId);
      if (!row) throw new AppError('not_found', { message: 'Document not found' });
      return { row, stream: await storage.open(accountId, row.storage_key) };
    },

    async signedUrl(accountId: string, documentId: string) {
      const row = await repo.find(accountId, documentId);
      if (!row) throw new AppError('not_found', { message: 'Document not found' });
      const exp = Math.floor(now().getTime() / 1000) + SIGNED_URL_TTL_SECONDS;
      const sig = documentSignature(secret, row.id, exp);
      return {
        url: `${currentPublicUrl()}/api/v1/documents/${row.id}?exp=${exp}&sig=${sig}`,
        expires_at: iso(new Date(exp * 1000)),
      };
    },
  };
}

export type DocumentsService = ReturnType<typeof createDocumentsService>;

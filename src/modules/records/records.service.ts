import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { Db } from '../../db/types.ts';
import { AppError, type ValidationDetail } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import { createBatcher } from '../../lib/batcher.ts';
import { generateToken, hashSecret } from '../../lib/credentials.ts';
import { decodeCursor, encodeCursor, refuseUnstorableTimes, timeBound } from '../../lib/cursor.ts';
import type { OutboundService } from '../../outbound/outbound.service.ts';
import type { AuthService } from '../auth/auth.service.ts';
import { isFileType } from '../entities/entities.model.ts';
import type { EntitiesService } from '../entities/entities.service.ts';
import type { Warning } from '../intake/intake.service.ts';
import {
  createFieldMatcher,
  dedupeKeyOf,
  displayName,
  emailOf,
  missingRequired,
  namesSetAside,
  readValue,
  reportUnmapped,
  reportUnusedName,
  setAsideDetail,
} from './field-values.ts';
import { recordEventData } from './record-webhooks.ts';
import {
  isDuplicateValuesViolation,
  type RecordsListFilter,
  type RecordsReadRepo,
  type RecordsRepo,
} from './records.repo.ts';

/** The query of `GET /api/v1/records`, as validated by its schema. */
export interface RecordListFilter {
  entity?: string;
  updated_since?: string;
  stage?: string;
  pipeline?: string;
  source?: string;
  created_from?: string;
  created_to?: string;
  q?: string;
  order?: string;
  limit?: number;
  cursor?: string;
}

/** Record tokens live 30 days unless made shorter (decisions §6). */
const RECORD_TOKEN_MAX_DAYS = 30;
/** S1 shows the latest 50 events (decisions §10). */
const S1_EVENT_COUNT = 50;

type FullRecord = NonNullable<Awaited<ReturnType<RecordsReadRepo['findFull']>>>;
type DocumentRow = Awaited<ReturnType<RecordsReadRepo['documentsOf']>>[number];

export function documentUrl(documentId: string): string {
  return `/api/v1/documents/${documentId}`;
}

/** What an answer shows of a document. */
type ListedDocument = Pick<DocumentRow, 'id' | 'name' | 'mime' | 'size' | 'field'>;

export function presentDocument(doc: ListedDocument) {
  return {
    id: doc.id,
    name: doc.name,
    mime: doc.mime,
    size: Number(doc.size),
    ...(doc.field ? { field: doc.field } : {}),
    url: documentUrl(doc.id),
  };
}

/** ISO 8601 with an explicit offset (interface: Events), e.g. 2026-11-22T12:00:00.000+00:00. */
export function isoWithOffset(value: Date): string {
  return value.toISOString().replace('Z', '+00:00');
}

/** Stays listed by the history (newest first); a record moved more often shows its latest. */
const MAX_STAYS = 500;

const ACTOR_TYPES: Record<string, 'api_key' | 'user' | 'source' | 'record_token' | 'automation' | 'system'> =
  {
    api: 'api_key',
    user: 'user',
    source: 'source',
    record_token: 'record_token',
    automation: 'automation',
    system: 'system',
  };

/** A stored actor (`api:<key name>`, `user:<email>`, `source:<name>`, `automation:<name>`, `record_token`, `system`) as history shows it. */
export function actorOf(stored: string): { type: string; name: string } {
  const colon = stored.indexOf(':');
  const prefix = colon === -1 ? stored : stored.slice(0, colon);
  const type = ACTOR_TYPES[prefix] ?? 'system';
  const name =
    colon === -1 ? (type === 'api_key' ? 'API' : prefix.replace('_', ' ')) : stored.slice(colon + 1);
  return { type, name };
}

/**
 * Who reads a record: the account, and the API key when one was presented; `checked` false when
 * it was taken from memory and is checked by the read's statement (see AuthService.findApiKey).
 */
export interface RecordReader {
  accountId: string;
  key: { keyId: string; checked: boolean } | null;
}

/** Who changes a record, for history and strict mode. */
export interface ChangeContext {
  accountId: string;
  strict: boolean;
  actor: string;
  requestId: string;
}

export interface ValuesChange {
  entityKey: string;
  changed: string[];
  warnings: Warning[];
}

export interface RecordsServiceDeps {
  db: Db;
  entities: EntitiesService;
  records: RecordsRepo;
  reads: RecordsReadRepo;
  /** Account webhooks: `record.updated` is written with the change. */
  outbound: Pick<OutboundService, 'emitEvent'>;
  /** Forgets a remembered API key that a read found revoked. */
  auth: Pick<AuthService, 'forgetApiKey'>;
  /**
   * Grouped read statements run at once (group commit, as intake's creations): the reads of
   * one account that arrive in one turn of the event loop, or while all of these run, share the
   * next statement. Default 3 (the service passes a third of its pool).
   */
  concurrentReads?: number;
}

/** At most this many reads share one statement. */
const MAX_GROUPED_READS = 10;

export function createRecordsService({
  db,
  entities,
  records,
  reads,
  outbound,
  auth,
  concurrentReads = 3,
}: RecordsServiceDeps) {
  const groupedReads = createBatcher({
    maxBatch: MAX_GROUPED_READS,
    maxInFlight: concurrentReads,
    run: (accountId: string, items: { id: string; uncheckedKeyId: string | null }[]) =>
      reads.findManyFullWithDocuments(accountId, items),
  });

  function present(record: FullRecord, documents: ListedDocument[]) {
    return {
      id: record.id,
      entity: record.entity_key,
      name: record.name,
      fields: record.fields,
      source: record.source,
      external_id: record.external_id,
      origin: record.origin,
      documents: documents.map(presentDocument),
      created_at: iso(record.created_at),
      updated_at: iso(record.updated_at),
      crm: record.stage_name
        ? {
            pipeline: record.pipeline_name ?? '',
            stage: record.stage_name,
            entered_at: iso(record.stage_entered_at ?? record.created_at),
          }
        : null,
    };
  }

  async function load(accountId: string, id: string): Promise<FullRecord> {
    const record = await reads.findFull(accountId, id);
    if (!record) throw new AppError('not_found', { message: 'Record not found' });
    return record;
  }

  return {
    /**
     * The record with its documents, in one statement that also checks a remembered key; reads
     * that arrive together share it (see `groupedReads`).
     */
    async get(reader: RecordReader, id: string) {
      const key = reader.key;
      const found = await groupedReads.submit(reader.accountId, {
        id,
        uncheckedKeyId: key && !key.checked ? key.keyId : null,
      });
      if (!found.keyLive) {
        auth.forgetApiKey(reader.accountId, key!.keyId);
        throw new AppError('unauthorized');
      }
      if (key) key.checked = true;
      if (!found.record) throw new AppError('not_found', { message: 'Record not found' });
      return present(found.record, found.record.documents);
    },

    async list(accountId: string, query: RecordListFilter) {
      const limit = query.limit ?? 100;
      const newest = query.order === 'newest';
      let entityId: string | undefined;
      if (query.entity) {
        const entity = await entities.find(accountId, query.entity);
        if (!entity) throw new AppError('unknown_entity', { message: `No entity ${query.entity}` });
        entityId = entity.id;
      }
      const times = {
        updated_since: query.updated_since ? new Date(query.updated_since) : undefined,
        created_from: timeBound(query.created_from, false),
        created_to: timeBound(query.created_to, true),
      };
      refuseUnstorableTimes(times);
      let after: { at: string; id: string } | null = null;
      const order = newest ? 'newest' : 'updated';
      const position = decodeCursor(query.cursor, order);
      if (position) after = { at: position.createdAt, id: position.id };
      const filter: RecordsListFilter = {
        entityId,
        updatedSince: times.updated_since,
        createdFrom: times.created_from,
        createdBefore: times.created_to,
        stage: query.stage,
        pipeline: query.pipeline,
        source: query.source,
        text: query.q,
      };
      const rows = await reads.list(accountId, filter, order, limit + 1, after);
      const page = rows.slice(0, limit);
      const documents = await reads.documentsOf(
        accountId,
        page.map((r) => r.id),
      );
      const recordsOut = page.map((row) =>
        present(
          row,
          documents.filter((d) => d.record_id === row.id),
        ),
      );
      const last = page[page.length - 1];
      return {
        records: recordsOut,
        next_cursor:
          rows.length > limit && last
            ? encodeCursor(newest ? last.created_at : last.updated_at, last.id, order)
            : null,
      };
    },

    /**
     * Changes named values of a record; unnamed ones stay. `scope` limits the writable fields
     * (record tokens): others are reported as `not_in_scope`. An empty value clears the field.
     */
    async changeValues(
      ctx: ChangeContext,
      recordId: string,
      submitted: [string, unknown][],
      scope: string[] | null,
    ): Promise<ValuesChange> {
      return db.transaction().execute(async (tx) => {
        const row = await reads.lockForUpdate(ctx.accountId, recordId, tx);
        if (!row) throw new AppError('not_found', { message: 'Record not found' });
        const entity = await entities.find(ctx.accountId, row.entity_id, tx);
        if (!entity) throw new AppError('not_found', { message: 'Record not found' });
        const match = createFieldMatcher(entity);
        const stored = row.fields as Record<string, unknown>;
        const next: Record<string, unknown> = { ...stored };
        const warnings: Warning[] = [];
        const problems: ValidationDetail[] = [];
        const fields = submitted.map(([name]) => match(name));
        const setAside = namesSetAside(submitted, fields);
        const reported = { problems, warnings };
        for (const [index, [name, raw]] of submitted.entries()) {
          const field = fields[index];
          if (!field) {
            reportUnmapped(ctx.strict, name, `${name} matches no field`, reported);
            continue;
          }
          const aside = setAside?.get(index);
          if (aside) {
            reportUnusedName(ctx.strict, setAsideDetail(aside), reported);
            continue;
          }
          if (scope && !scope.includes(field.key)) {
            warnings.push({ key: field.key, reason: 'not_in_scope' });
            continue;
          }
          if (isFileType(field.type)) {
            problems.push({
              key: field.key,
              reason: 'invalid_type',
              message: `${field.key} takes documents`,
            });
            continue;
          }
          const coerced = readValue(field, raw);
          if (coerced === null) {
            delete next[field.key];
            continue;
          }
          if (coerced.ok) next[field.key] = coerced.value;
          else problems.push({ key: field.key, reason: coerced.reason, message: coerced.message });
        }
        problems.push(
          ...missingRequired(entity, next).filter((p) => submitted.some(([n]) => match(n)?.key === p.key)),
        );
        if (problems.length > 0) throw new AppError('validation_failed', { details: problems });
        // Changed keys in the entity's field order, so that answers are stable.
        const changed = entity.fields
          .map((field) => field.key)
          .filter((key) => !isDeepStrictEqual(stored[key], next[key]));
        if (changed.length > 0) {
          const updated = await records
            .updateValues(
              ctx.accountId,
              recordId,
              {
                fields: next,
                name: displayName(entity, next),
                emailLc: emailOf(entity, next),
                dedupeKey: dedupeKeyOf(entity, next),
              },
              tx,
            )
            .catch((error: unknown) => {
              // Under an update or ignore rule, two records may not share the rule's values.
              if (isDuplicateValuesViolation(error)) {
                throw new AppError('conflict', {
                  message: 'Another record has the same values for the duplicate rule',
                  extra: { reason: 'duplicate' },
                });
              }
              throw error;
            });
          await records.insertEvents(
            ctx.accountId,
            [
              {
                recordId,
                type: 'lead_updated',
                message: `Updated ${changed.join(', ')}`,
                actor: ctx.actor,
                data: { fields: changed, request_id: ctx.requestId },
              },
            ],
            tx,
          );
          await outbound.emitEvent(tx, ctx.accountId, 'record.updated', {
            ...recordEventData(entity.key, { ...updated, name: displayName(entity, next), fields: next }),
            changed,
          });
        }
        return { entityKey: entity.key, changed, warnings };
      });
    },

    async issueToken(
      accountId: string,
      recordId: string,
      input: { fields: string[]; expires_in_days?: number },
    ) {
      const record = await load(accountId, recordId);
      const entity = await entities.find(accountId, record.entity_id);
      const unknown = input.fields.filter((key) => !entity?.fields.some((f) => f.key === key));
      if (unknown.length > 0) {
        throw new AppError('validation_failed', {
          details: unknown.map((key) => ({
            key: 'fields',
            reason: 'unknown_field',
            message: `no field ${key}`,
          })),
        });
      }
      const days = Math.min(input.expires_in_days ?? RECORD_TOKEN_MAX_DAYS, RECORD_TOKEN_MAX_DAYS);
      const token = generateToken('rt_');
      const expiresAt = new Date(Date.now() + days * 24 * 60 * 60 * 1000);
      const row = await reads.insertRecordToken(accountId, {
        id: randomUUID(),
        recordId,
        tokenHash: hashSecret(token),
        fields: [...new Set(input.fields)],
        expiresAt,
      });
      return { token, expires_at: iso(row.expires_at) };
    },

    /** GET /api/v1/records/{id}/history (decisions §7): events a page at a time, and the stays. */
    async history(accountId: string, id: string, query: { limit?: number; cursor?: string }) {
      const limit = query.limit ?? 100;
      const after = decodeCursor(query.cursor);
      await load(accountId, id);
      const rows = await reads.historyPage(accountId, id, limit + 1, after);
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      const stays = after ? [] : await reads.stays(accountId, id, MAX_STAYS);
      const now = Date.now();
      return {
        events: page.map((event) => ({
          id: event.id,
          type: event.type,
          message: event.message,
          data: event.data,
          actor: actorOf(event.actor),
          created_at: iso(event.created_at),
        })),
        stages: stays.map((stay) => ({
          pipeline: stay.pipeline,
          stage: stay.stage,
          entered_at: iso(stay.entered_at),
          left_at: stay.left_at ? iso(stay.left_at) : null,
          seconds: Math.max(
            0,
            Math.floor(((stay.left_at?.getTime() ?? now) - stay.entered_at.getTime()) / 1000),
          ),
        })),
        next_cursor: rows.length > limit && last ? encodeCursor(last.created_at, last.id) : null,
      };
    },

    /** S1 read view (interface: GET /leads/{id}). */
    async getLead(accountId: string, id: string) {
      const record = await load(accountId, id);
      const events = await reads.latestEvents(accountId, id, S1_EVENT_COUNT);
      return {
        lead_id: record.id,
        entity: record.entity_id,
        status_step: record.stage_name ?? null,
        fields: record.fields,
        events: events.map((event) => ({
          // S1 calls a stage move a status event (interface: Events).
          type: event.type === 'stage_changed' ? 'lead_status_event' : event.type,
          message: event.message,
          created_at: isoWithOffset(event.created_at),
        })),
      };
    },
  };
}

export type RecordsService = ReturnType<typeof createRecordsService>;

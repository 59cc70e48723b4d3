import { sql } from 'kysely';
import { toJson } from '../../db/json.ts';
import { pastCursor } from '../../db/keyset.ts';
import type { Executor } from '../../db/types.ts';
import type { CursorPosition } from '../../lib/cursor.ts';
import { timeOrderedId } from '../../lib/ids.ts';

export interface IntakeLogEntry {
  requestId: string;
  endpoint: string;
  outcome: string;
  statusCode: number;
  recordId: string | null;
  entityKey: string | null;
  source: string | null;
  warnings: unknown[];
  error: string | null;
  /** A bulk call's outcome per entry; absent for single-record calls. */
  items?: BulkLogItem[];
}

/** One entry of a bulk call, as its log entry lists it (decisions §10). */
export interface BulkLogItem {
  index: number;
  status: 'created' | 'updated' | 'unchanged' | 'refused';
  record_id?: string;
  warnings?: unknown[];
  error?: string;
  details?: unknown[];
}

/** Filters of the intake log; `before` is exclusive. */
export interface IntakeLogFilter {
  outcome?: string;
  endpoint?: string;
  source?: string;
  entity?: string;
  recordId?: string;
  requestId?: string;
  from?: Date;
  before?: Date;
}

export function createIntakeRepo(db: Executor) {
  return {
    async log(accountId: string, entries: IntakeLogEntry[], tx: Executor = db) {
      if (entries.length === 0) return;
      await tx
        .insertInto('intake_log')
        .values(
          entries.map((entry) => ({
            account_id: accountId,
            id: timeOrderedId(),
            request_id: entry.requestId,
            endpoint: entry.endpoint,
            outcome: entry.outcome,
            status_code: entry.statusCode,
            record_id: entry.recordId,
            entity_key: entry.entityKey,
            source: entry.source,
            warnings: toJson(entry.warnings),
            error: entry.error,
            items: entry.items ? toJson(entry.items) : null,
          })),
        )
        .execute();
    },

    /** Newest first. */
    list(
      accountId: string,
      filter: IntakeLogFilter,
      limit: number,
      before: CursorPosition | null,
      tx: Executor = db,
    ) {
      let query = tx
        .selectFrom('intake_log')
        .select([
          'id',
          'request_id',
          'endpoint',
          'outcome',
          'status_code',
          'record_id',
          'entity_key',
          'source',
          'warnings',
          'error',
          'items',
          'created_at',
        ])
        .where('account_id', '=', accountId);
      if (filter.outcome) query = query.where('outcome', '=', filter.outcome);
      if (filter.endpoint) query = query.where('endpoint', '=', filter.endpoint);
      if (filter.source) query = query.where('source', '=', filter.source);
      if (filter.entity) query = query.where('entity_key', '=', filter.entity);
      if (filter.requestId) query = query.where('request_id', '=', filter.requestId);
      if (filter.from) query = query.where('created_at', '>=', filter.from);
      if (filter.before) query = query.where('created_at', '<', filter.before);
      const recordId = filter.recordId;
      if (recordId) {
        // A bulk call names its records in `items`.
        query = query.where((eb) =>
          eb.or([
            eb('record_id', '=', recordId),
            sql<boolean>`items @> ${JSON.stringify([{ record_id: recordId }])}::jsonb`,
          ]),
        );
      }
      if (before) {
        query = query.where(pastCursor('created_at', 'id', 'before', before.createdAt, before.id));
      }
      return query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
    },
  };
}

export type IntakeRepo = ReturnType<typeof createIntakeRepo>;

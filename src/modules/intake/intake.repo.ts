import { randomUUID } from 'node:crypto';
import { toJson } from '../../db/json.ts';
import type { Executor } from '../../db/types.ts';
import type { CursorPosition } from '../../lib/cursor.ts';

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

export function createIntakeRepo(db: Executor) {
  return {
    async log(accountId: string, entries: IntakeLogEntry[], tx: Executor = db) {
      if (entries.length === 0) return;
      await tx
        .insertInto('intake_log')
        .values(
          entries.map((entry) => ({
            account_id: accountId,
            id: randomUUID(),
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
    list(accountId: string, limit: number, before: CursorPosition | null, tx: Executor = db) {
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
      if (before) {
        query = query.where((eb) =>
          eb.or([
            eb('created_at', '<', new Date(before.createdAt)),
            eb.and([eb('created_at', '=', new Date(before.createdAt)), eb('id', '<', before.id)]),
          ]),
        );
      }
      return query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
    },
  };
}

export type IntakeRepo = ReturnType<typeof createIntakeRepo>;

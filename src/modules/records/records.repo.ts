import { type QueryResult, sql } from 'kysely';
import { isUniqueViolation } from '../../db/errors.ts';
import { type SentOnceText, toJson, toJsonSentOnce } from '../../db/json.ts';
import { pastCursor } from '../../db/keyset.ts';
import { PREPARED } from '../../db/prepared.ts';
import { lockNamed } from '../../db/transaction.ts';
import type { Executor } from '../../db/types.ts';
import { timeOrderedId } from '../../lib/ids.ts';
import type { IntakeLogEntry } from '../intake/intake.repo.ts';

export interface NewRecordRow {
  id: string;
  entityId: string;
  name: string;
  fields: Record<string, unknown>;
  source: string;
  sourceId: string | null;
  origin: Record<string, string>;
  externalId: string | null;
  emailLc: string | null;
  dedupeKey: string | null;
  /** The database refuses a second record with the same duplicate-rule values. */
  dedupeUnique: boolean;
  duplicateOf: string | null;
  pipelineId: string | null;
  stageId: string | null;
  assigneeId: string | null;
  viewerIds: string[];
  /** Who created it, as the history names actors (`api:<key name>`, `source:<name>`, `user:<email>`). */
  createdBy: string;
}

/**
 * The one row of a grouped creation: the earliest creation time (epoch ms; null when nothing
 * was created) and the items not created, by why: answer key taken, API key revoked, refused by
 * a unique rule.
 */
interface CreatedManyRow {
  created_ms: number | null;
  taken: string[];
  revoked: string[];
  refused: string[];
}

/** A value all items of a grouped statement share, or NOT_SHARED. */
const NOT_SHARED: unique symbol = Symbol('not shared');
type Shared<T> = T | undefined | typeof NOT_SHARED;

function isEmptyObject(value: object | null | undefined): boolean {
  if (!value) return false;
  for (const _ in value) return false;
  return true;
}

/** An idempotent request's answer, stored with its record by the statement that writes it. */
export interface IdempotentAnswer {
  scope: string;
  key: string;
  requestHash: string;
  statusCode: number;
  body: unknown;
  ttlHours: number;
}

export interface RecordEventInput {
  recordId: string;
  type: string;
  message: string;
  actor?: string;
  data?: Record<string, unknown>;
}

export interface NoteInput {
  recordId: string;
  kind: string;
  body: string;
  tag?: string | null;
  senderName?: string | null;
  idempotencyKey?: string | null;
  /** What a keyed note was asked with (notes.service `noteRequestHash`). */
  requestHash?: string | null;
}

const RECORD_COLUMNS = [
  'id',
  'entity_id',
  'name',
  'fields',
  'source',
  'external_id',
  'pipeline_id',
  'stage_id',
  'created_at',
  'updated_at',
] as const;

/** A timestamp as the API writes it (`toISOString`), in SQL. */
const ISO_FORMAT = sql.raw(`'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`);

/**
 * `record.created` messages of the outbound engine (one per subscribed account webhook) for the
 * records a one-statement creation inserted: the message rows are written by the same statement,
 * so that a record and its messages commit together. `recordJson` builds the payload's record
 * (see record-webhooks.ts) from the statement's own rows; `from` joins them.
 */
function recordCreatedOutbox(accountId: string, webhooks: string[], recordJson: unknown, from: unknown) {
  return sql`, outbox AS (
    INSERT INTO outbound_messages (account_id, id, channel, destination_id, event_type, payload)
    SELECT ${accountId}::uuid, time_ordered_uuid(), 'webhook', dest, 'record.created',
      jsonb_build_object('type', 'record.created', 'timestamp', to_char(now() AT TIME ZONE 'UTC', ${ISO_FORMAT}),
        'data', jsonb_build_object('record', ${recordJson}))
    FROM ${from}, unnest(${webhooks}::uuid[]) AS dest
  )`;
}

function recordJsonOf(columns: { entityKey: unknown; name: unknown; fields: unknown; source: unknown }) {
  return sql`jsonb_build_object('id', ins.id, 'entity', ${columns.entityKey}, 'name', ${columns.name},
    'fields', ${columns.fields}, 'source', ${columns.source},
    'created_at', to_char(ins.created_at AT TIME ZONE 'UTC', ${ISO_FORMAT}),
    'updated_at', to_char(ins.created_at AT TIME ZONE 'UTC', ${ISO_FORMAT}))`;
}

/**
 * The ids and creation times of the oldest `limit` records of the account whose email-role value
 * is `email` (lower-cased), of the entity `entityId` when that is not null. A record stands in one
 * of two indexes by its address (migration 0034): in `records_dedupe_unique` when a unique
 * duplicate rule keys it by that address alone, else in `records_email_rest`; each branch states
 * its index's predicate as written there, so that the planner proves it. The second branch probes
 * the unique index once per entity of the account (a handful).
 */
function emailMatches(
  accountId: unknown,
  email: unknown,
  entityId: unknown,
  limit: number,
  guard = sql`true`,
) {
  return sql`SELECT m.id, m.created_at FROM (
      (SELECT r.id, r.created_at FROM records r
        WHERE ${guard} AND r.account_id = ${accountId}::uuid AND r.email_lc = ${email}::text
          AND (NOT r.dedupe_unique OR r.dedupe_key IS DISTINCT FROM r.email_lc)
          AND (${entityId}::uuid IS NULL OR r.entity_id = ${entityId}::uuid)
        ORDER BY r.created_at LIMIT ${sql.lit(limit)})
      UNION ALL
      (SELECT r.id, r.created_at FROM entities e
        JOIN records r ON r.account_id = e.account_id AND r.entity_id = e.id
        WHERE ${guard} AND e.account_id = ${accountId}::uuid AND (${entityId}::uuid IS NULL OR e.id = ${entityId}::uuid)
          AND r.dedupe_unique AND r.dedupe_key = ${email}::text AND r.email_lc = ${email}::text)
    ) AS m
    ORDER BY m.created_at, m.id LIMIT ${sql.lit(limit)}`;
}

/** The database refused an update for the duplicate rule's unique index (`records_dedupe_unique`). */
export function isDuplicateValuesViolation(error: unknown): boolean {
  const { code, constraint } = (error ?? {}) as { code?: unknown; constraint?: unknown };
  return code === '23505' && constraint === 'records_dedupe_unique';
}

export function createRecordsRepo(db: Executor) {
  return {
    /**
     * Serialises writers of one logical record (same external id or duplicate key) until the
     * transaction ends, so that two concurrent handovers cannot both create it.
     */
    async lock(tx: Executor, accountId: string, identity: string) {
      await lockNamed(tx, `${accountId}:${identity}`);
    },

    /** `lock` for several identities at once, taken in one order so that two callers never deadlock. */
    async lockAll(tx: Executor, accountId: string, identities: string[]) {
      if (identities.length === 0) return;
      const names = [...new Set(identities)].sort().map((identity) => `${accountId}:${identity}`);
      await sql`SELECT pg_advisory_xact_lock(hashtextextended(name, 0))
        FROM (SELECT name FROM jsonb_array_elements_text(${toJson(names)}::jsonb) AS e(name) ORDER BY name) AS ordered`.execute(
        tx,
      );
    },

    /**
     * Creates a record with its notes, intake log entry and stored idempotent answer in one
     * statement (one round trip, atomic on its own); its creation and first stage are facts of
     * its row (see `latestEvents`). Answers undefined when a unique rule refused the record
     * (same external id, or same duplicate-rule values), and then nothing at all was written.
     */
    async createInOneStatement(
      accountId: string,
      row: NewRecordRow,
      extras: {
        notes: { body: string; tag: string | null; senderName: string | null }[];
        log: {
          requestId: string;
          endpoint: string;
          statusCode: number;
          entityKey: string;
          source: string;
          warnings: unknown[];
        };
        answer: { scope: string; key: string; statusCode: number; body: unknown } | null;
        /** False for an entry of a bulk call, whose call writes one log entry for all its entries. */
        logged?: boolean;
        /** An API key taken from memory: nothing is written unless it is still live. */
        uncheckedKeyId: string | null;
        /** Account webhooks subscribed to `record.created`. */
        webhooks?: string[];
      },
    ): Promise<{ keyLive: boolean; record: { id: string; created_at: Date } | undefined }> {
      const webhooks = extras.webhooks ?? [];
      const result = await sql<{ id: string | null; created_at: Date | null; key_live: boolean }>`
        WITH key_live AS (
          SELECT ${extras.uncheckedKeyId}::uuid IS NULL OR EXISTS (
            SELECT 1 FROM api_keys
            WHERE account_id = ${accountId} AND id = ${extras.uncheckedKeyId}::uuid AND revoked_at IS NULL
          ) AS live
        ), ins AS (
          INSERT INTO records (account_id, id, entity_id, name, fields, source, source_id, origin, external_id, email_lc,
            dedupe_key, dedupe_unique, duplicate_of, pipeline_id, stage_id, stage_entered_at, assignee_id, viewer_ids,
            created_by)
          SELECT ${accountId}, ${row.id}, ${row.entityId}, ${row.name}, ${toJson(row.fields)}::jsonb, ${row.source},
            ${row.sourceId}, ${toJson(row.origin)}::jsonb, ${row.externalId}, ${row.emailLc}, ${row.dedupeKey},
            ${row.dedupeUnique}, ${row.duplicateOf}, ${row.pipelineId}, ${row.stageId},
            CASE WHEN ${row.stageId}::uuid IS NULL THEN NULL ELSE now() END, ${row.assigneeId}, ${row.viewerIds}::uuid[],
            ${row.createdBy}
          FROM key_live WHERE key_live.live
          ON CONFLICT DO NOTHING
          RETURNING id, created_at${webhooks.length > 0 ? sql`, name, fields, source` : sql``}
        )${
          webhooks.length > 0
            ? recordCreatedOutbox(
                accountId,
                webhooks,
                recordJsonOf({
                  entityKey: sql`${extras.log.entityKey}::text`,
                  name: sql`ins.name`,
                  fields: sql`ins.fields`,
                  source: sql`ins.source`,
                }),
                sql`ins`,
              )
            : sql``
        }, note_rows AS (
          INSERT INTO notes (account_id, id, record_id, kind, body, tag, sender_name)
          SELECT ${accountId}, time_ordered_uuid(), ins.id, 'general', n->>'body', n->>'tag', n->>'senderName'
          FROM ins, jsonb_array_elements(${toJson(extras.notes)}::jsonb) AS n
        ), note_events AS (
          INSERT INTO record_events (account_id, id, record_id, type, message, actor, data)
          SELECT ${accountId}, time_ordered_uuid(), ins.id, 'note_added', left(n->>'body', 500), ${row.createdBy}::text,
            jsonb_build_object('sender', 'api', 'sender_name', n->'senderName', 'tag', n->'tag')
          FROM ins, jsonb_array_elements(${toJson(extras.notes)}::jsonb) AS n
        ), log_entry AS (
          INSERT INTO intake_log (account_id, id, request_id, endpoint, outcome, status_code, record_id, entity_key, source, warnings)
          SELECT ${accountId}, time_ordered_uuid(), ${extras.log.requestId}, ${extras.log.endpoint}, 'created',
            ${extras.log.statusCode}, ins.id, ${extras.log.entityKey}, ${extras.log.source}, ${toJson(extras.log.warnings)}::jsonb
          FROM ins WHERE ${extras.logged ?? true}::boolean
        ), stored_answer AS (
          UPDATE idempotency_keys SET state = 'done', status_code = ${extras.answer?.statusCode ?? null},
            response = ${extras.answer ? toJson(extras.answer.body) : null}::jsonb
          WHERE ${extras.answer !== null} AND account_id = ${accountId} AND scope = ${extras.answer?.scope ?? ''}
            AND key = ${extras.answer?.key ?? ''} AND EXISTS (SELECT 1 FROM ins)
        )
        SELECT ins.id, ins.created_at, key_live.live AS key_live
        FROM key_live LEFT JOIN ins ON true ${PREPARED}`.execute(db);
      const answer = result.rows[0]!;
      return {
        keyLive: answer.key_live,
        record: answer.id && answer.created_at ? { id: answer.id, created_at: answer.created_at } : undefined,
      };
    },

    /**
     * Creates many new records, each with its notes and intake log entry (an item without `log`
     * has none: a bulk call logs itself as one entry), in one statement.
     * Rows a unique rule refuses (external id, duplicate-rule values, also against each other)
     * are skipped; the answer lists the ids that were created. `items` is emptied once the
     * statement's input is made, before it is sent.
     */
    async createManyInOneStatement(
      accountId: string,
      items: {
        row: NewRecordRow;
        notes: { body: string; tag: string | null; senderName: string | null }[];
        log: {
          requestId: string;
          endpoint: string;
          entityKey: string;
          warnings: unknown[];
          /** The status the sender was answered with, when not 201 (S1 answers 200). */
          statusCode?: number;
        } | null;
        /** The entity's key (also without a log entry: webhook messages name it). */
        entityKey: string;
        /** An API key taken from memory: the item is written only while the key is unrevoked. */
        uncheckedKeyId?: string | null;
        /**
         * An idempotency key no row holds yet: the item is written only if the statement inserts
         * the key's row, done, with this answer (a key another request holds leaves it unwritten).
         * Keys must differ within one call.
         */
        answer?: IdempotentAnswer | null;
      }[],
      /** Account webhooks subscribed to `record.created`: a message for each to every new record. */
      webhooks: string[] = [],
      /**
       * A log entry for the call as a whole (a bulk call's), written by the same statement when
       * every item was created, as it then lists them; otherwise not written (`logged` false).
       */
      callLog: IntakeLogEntry | null = null,
      /**
       * Inserts the records as a plain INSERT first, which a record a unique rule refuses makes
       * fail, and only then runs again skipping such records; false skips them from the start
       * (for an account whose statements met such records lately).
       */
      optimistic = false,
    ): Promise<{
      created: Map<string, Date>;
      keyRevoked: Set<string>;
      answerKeyTaken: Set<string>;
      logged: boolean;
      /** A unique rule refused at least one record (whether the first run failed or skipped it). */
      conflicted: boolean;
      /** How many times the statement ran: 2 when an optimistic first run failed on a refused record. */
      runs: number;
    }> {
      if (items.length === 0)
        return {
          created: new Map(),
          keyRevoked: new Set(),
          answerKeyTaken: new Set(),
          logged: false,
          conflicted: false,
          runs: 0,
        };
      // A value every item shares (a bulk call's entity, stage, source, key) is sent once as a
      // parameter of its own and left out of the items; a value left out of an item's JSON reads
      // as NULL in jsonb_to_recordset, so absent values are left out too rather than written as
      // null. Less JSON for the server to build and send and for PostgreSQL to parse: about 40%
      // of a bulk entry's item.
      const first = items[0]!;
      const shareable: {
        [K in
          | 'entity_id'
          | 'source'
          | 'source_id'
          | 'pipeline_id'
          | 'stage_id'
          | 'request_id'
          | 'endpoint'
          | 'entity_key'
          | 'key_id'
          | 'created_by']: Shared<string>;
      } & { dedupe_unique: Shared<boolean>; origin_empty: boolean; dedupe_key_is_email: boolean } = {
        entity_id: first.row.entityId,
        source: first.row.source ?? undefined,
        source_id: first.row.sourceId ?? undefined,
        pipeline_id: first.row.pipelineId ?? undefined,
        stage_id: first.row.stageId ?? undefined,
        dedupe_unique: first.row.dedupeUnique,
        request_id: first.log?.requestId,
        endpoint: first.log?.endpoint,
        entity_key: first.entityKey,
        key_id: first.uncheckedKeyId ?? undefined,
        created_by: first.row.createdBy,
        origin_empty: isEmptyObject(first.row.origin),
        // A duplicate rule on the email alone makes the key the email's matching form, which
        // the item carries already as `email_lc`.
        dedupe_key_is_email: true,
      };
      for (const item of items) {
        if (item.row.entityId !== shareable.entity_id) shareable.entity_id = NOT_SHARED;
        if ((item.row.source ?? undefined) !== shareable.source) shareable.source = NOT_SHARED;
        if ((item.row.sourceId ?? undefined) !== shareable.source_id) shareable.source_id = NOT_SHARED;
        if ((item.row.pipelineId ?? undefined) !== shareable.pipeline_id) shareable.pipeline_id = NOT_SHARED;
        if ((item.row.stageId ?? undefined) !== shareable.stage_id) shareable.stage_id = NOT_SHARED;
        if (item.row.dedupeUnique !== shareable.dedupe_unique) shareable.dedupe_unique = NOT_SHARED;
        if (item.log?.requestId !== shareable.request_id) shareable.request_id = NOT_SHARED;
        if (item.log?.endpoint !== shareable.endpoint) shareable.endpoint = NOT_SHARED;
        if (item.entityKey !== shareable.entity_key) shareable.entity_key = NOT_SHARED;
        if ((item.uncheckedKeyId ?? undefined) !== shareable.key_id) shareable.key_id = NOT_SHARED;
        if (item.row.createdBy !== shareable.created_by) shareable.created_by = NOT_SHARED;
        if (shareable.origin_empty && !isEmptyObject(item.row.origin)) shareable.origin_empty = false;
        if ((item.row.dedupeKey ?? null) !== (item.row.emailLc ?? null))
          shareable.dedupe_key_is_email = false;
      }
      const sharedOf = <T>(shared: Shared<T>): T | null =>
        shared === NOT_SHARED || shared === undefined ? null : shared;
      // Each item is built with only the keys it has a value for: an item has about 30
      // possible keys and a handful of values, and a key set to undefined still costs
      // JSON.stringify a look-up (a fifth less time for a bulk call's items).
      const input = items.map((item, ord) => {
        const { row, log, answer } = item;
        const entry: Record<string, unknown> = { ord, id: row.id, fields: row.fields };
        if (shareable.entity_id === NOT_SHARED) entry.entity_id = row.entityId;
        if (row.name !== null && row.name !== undefined) entry.name = row.name;
        if (shareable.source === NOT_SHARED && row.source !== null) entry.source = row.source;
        if (shareable.source_id === NOT_SHARED && row.sourceId !== null) entry.source_id = row.sourceId;
        if (!shareable.origin_empty && row.origin) entry.origin = row.origin;
        if (row.externalId !== null && row.externalId !== undefined) entry.external_id = row.externalId;
        if (row.emailLc !== null && row.emailLc !== undefined) entry.email_lc = row.emailLc;
        if (!shareable.dedupe_key_is_email && row.dedupeKey !== null && row.dedupeKey !== undefined) {
          entry.dedupe_key = row.dedupeKey;
        }
        if (shareable.dedupe_unique === NOT_SHARED) entry.dedupe_unique = row.dedupeUnique;
        if (shareable.pipeline_id === NOT_SHARED && row.pipelineId !== null)
          entry.pipeline_id = row.pipelineId;
        if (shareable.stage_id === NOT_SHARED && row.stageId !== null) entry.stage_id = row.stageId;
        // jsonb_array_elements(NULL) yields no rows, like an empty array.
        if (item.notes.length > 0) entry.notes = item.notes;
        if (log) {
          if (shareable.request_id === NOT_SHARED) entry.request_id = log.requestId;
          if (shareable.endpoint === NOT_SHARED) entry.endpoint = log.endpoint;
          // Read only with the log entry (endpoint set).
          entry.warnings = log.warnings;
          if (log.statusCode !== undefined) entry.log_status = log.statusCode;
        }
        if (shareable.entity_key === NOT_SHARED) entry.entity_key = item.entityKey;
        if (shareable.key_id === NOT_SHARED && item.uncheckedKeyId) entry.key_id = item.uncheckedKeyId;
        if (shareable.created_by === NOT_SHARED) entry.created_by = row.createdBy;
        if (answer) {
          entry.answer_scope = answer.scope;
          entry.answer_key = answer.key;
          entry.answer_hash = answer.requestHash;
          entry.answer_status = answer.statusCode;
          if (answer.body !== null && answer.body !== undefined) entry.answer_body = answer.body;
          entry.answer_ttl_hours = answer.ttlHours;
        }
        return entry;
      });
      // The ids are all the answer needs of the items: nothing else of them is held while the
      // statement runs (fewer objects for each collection to copy meanwhile).
      const ids = items.map((item) => item.row.id);
      // The parts no item needs are left out of the statement (each variant is prepared once):
      // a part that writes opens its table and every index of it at each execution, rows or not,
      // which for one or a few items cost more than the rows themselves.
      const anyAnswer = items.some((item) => item.answer);
      const anyNotes = items.some((item) => item.notes.length > 0);
      // Let go by the driver once sent, and the lists emptied, not only left behind: the
      // caller's frames hold the same list while the statement is awaited, and what is held
      // across that wait is promoted to the old generation.
      const inputJson = toJsonSentOnce(input);
      // A first run that may fail keeps the text for a second one (held across the wait only then).
      const again = optimistic ? inputJson.copy() : null;
      input.length = 0;
      items.length = 0;
      const statement = (skipConflicts: boolean, json: SentOnceText) => sql<CreatedManyRow>`
        WITH given AS (
          SELECT ord, id, COALESCE(entity_id, ${sharedOf(shareable.entity_id)}::uuid) AS entity_id, name, fields,
            COALESCE(source, ${sharedOf(shareable.source)}::text) AS source,
            COALESCE(source_id, ${sharedOf(shareable.source_id)}::uuid) AS source_id,
            COALESCE(origin, CASE WHEN ${shareable.origin_empty}::boolean THEN '{}'::jsonb END) AS origin,
            external_id, email_lc,
            CASE WHEN ${shareable.dedupe_key_is_email}::boolean THEN email_lc ELSE dedupe_key END AS dedupe_key,
            COALESCE(dedupe_unique, ${sharedOf(shareable.dedupe_unique)}::boolean) AS dedupe_unique,
            COALESCE(pipeline_id, ${sharedOf(shareable.pipeline_id)}::uuid) AS pipeline_id,
            COALESCE(stage_id, ${sharedOf(shareable.stage_id)}::uuid) AS stage_id, notes,
            COALESCE(request_id, ${sharedOf(shareable.request_id)}::text) AS request_id,
            COALESCE(endpoint, ${sharedOf(shareable.endpoint)}::text) AS endpoint,
            COALESCE(entity_key, ${sharedOf(shareable.entity_key)}::text) AS entity_key, warnings, log_status,
            COALESCE(key_id, ${sharedOf(shareable.key_id)}::uuid) AS key_id,
            COALESCE(created_by, ${sharedOf(shareable.created_by)}::text) AS created_by,
            answer_scope, answer_key, answer_hash, answer_status, answer_body, answer_ttl_hours
          FROM jsonb_to_recordset(${json}::jsonb) AS r(
            ord int, id uuid, entity_id uuid, name text, fields jsonb, source text, source_id uuid, origin jsonb,
            external_id text, email_lc text, dedupe_key text, dedupe_unique boolean, pipeline_id uuid, stage_id uuid,
            notes jsonb, request_id text, endpoint text, entity_key text,
            warnings jsonb, log_status int, key_id uuid, created_by text, answer_scope text, answer_key text, answer_hash text,
            answer_status int, answer_body jsonb, answer_ttl_hours int)
        ), live AS (
          SELECT * FROM given
          WHERE key_id IS NULL OR EXISTS (
            SELECT 1 FROM api_keys
            WHERE api_keys.account_id = ${accountId}::uuid AND api_keys.id = given.key_id AND api_keys.revoked_at IS NULL)
        )${
          anyAnswer
            ? sql`, claimed AS (
          -- The idempotency keys' rows first: the unique index decides, row by row, which key
          -- is free (no plan reads idempotency_keys any other way).
          INSERT INTO idempotency_keys (account_id, scope, key, request_hash, state, status_code, response,
            lease_until, expires_at)
          SELECT ${accountId}::uuid, answer_scope, answer_key, answer_hash, 'done', answer_status, answer_body,
            now(), now() + make_interval(hours => answer_ttl_hours)
          FROM live WHERE answer_key IS NOT NULL
          ON CONFLICT DO NOTHING
          RETURNING scope, key
        ), input AS (
          SELECT live.*, claimed.key IS NOT NULL AS claims FROM live
          LEFT JOIN claimed ON claimed.scope = live.answer_scope AND claimed.key = live.answer_key
          WHERE live.answer_key IS NULL OR claimed.key IS NOT NULL
        )`
            : sql`, input AS (
          SELECT live.*, false AS claims FROM live
        )`
        }, plain_ins AS (
          INSERT INTO records (account_id, id, entity_id, name, fields, source, source_id, origin, external_id, email_lc,
            dedupe_key, dedupe_unique, pipeline_id, stage_id, stage_entered_at, created_by)
          SELECT ${accountId}::uuid, id, entity_id, name, fields, source, source_id, origin, external_id, email_lc,
            dedupe_key, dedupe_unique, pipeline_id, stage_id, CASE WHEN stage_id IS NULL THEN NULL ELSE now() END,
            created_by
          FROM input WHERE NOT claims ORDER BY ord
          ${skipConflicts ? sql`ON CONFLICT DO NOTHING` : sql``}
          RETURNING id, created_at
        )${
          anyAnswer
            ? sql`, claimed_ins AS (
          -- Without ON CONFLICT: a record a unique rule refuses fails the whole statement, so that
          -- no stored answer names a record that was not written (each item is then taken alone).
          INSERT INTO records (account_id, id, entity_id, name, fields, source, source_id, origin, external_id, email_lc,
            dedupe_key, dedupe_unique, pipeline_id, stage_id, stage_entered_at, created_by)
          SELECT ${accountId}::uuid, id, entity_id, name, fields, source, source_id, origin, external_id, email_lc,
            dedupe_key, dedupe_unique, pipeline_id, stage_id, CASE WHEN stage_id IS NULL THEN NULL ELSE now() END,
            created_by
          FROM input WHERE claims ORDER BY ord
          RETURNING id, created_at
        ), ins AS (
          SELECT * FROM plain_ins UNION ALL SELECT * FROM claimed_ins
        )`
            : sql`, ins AS (
          SELECT * FROM plain_ins
        )`
        }${
          webhooks.length > 0
            ? recordCreatedOutbox(
                accountId,
                webhooks,
                recordJsonOf({
                  entityKey: sql`input.entity_key`,
                  name: sql`input.name`,
                  fields: sql`input.fields`,
                  source: sql`input.source`,
                }),
                sql`ins JOIN input USING (id)`,
              )
            : sql``
        }${
          anyNotes
            ? sql`, note_rows AS (
          INSERT INTO notes (account_id, id, record_id, kind, body, tag, sender_name)
          SELECT ${accountId}::uuid, time_ordered_uuid(), ins.id, 'general', n->>'body', n->>'tag', n->>'senderName'
          FROM ins JOIN input USING (id), jsonb_array_elements(input.notes) AS n
        ), note_events AS (
          INSERT INTO record_events (account_id, id, record_id, type, message, actor, data)
          SELECT ${accountId}::uuid, time_ordered_uuid(), ins.id, 'note_added', left(n->>'body', 500), input.created_by,
            jsonb_build_object('sender', 'api', 'sender_name', n->'senderName', 'tag', n->'tag')
          FROM ins JOIN input USING (id), jsonb_array_elements(input.notes) AS n
        )`
            : sql``
        }, log_entries AS (
          INSERT INTO intake_log (account_id, id, request_id, endpoint, outcome, status_code, record_id, entity_key, source, warnings)
          SELECT ${accountId}::uuid, time_ordered_uuid(), input.request_id, input.endpoint, 'created',
            COALESCE(input.log_status, 201), ins.id,
            input.entity_key, input.source, input.warnings
          FROM ins JOIN input USING (id) WHERE input.endpoint IS NOT NULL
        )${
          callLog
            ? sql`, call_log AS (
          INSERT INTO intake_log (account_id, id, request_id, endpoint, outcome, status_code, record_id, entity_key,
            source, warnings, error, items)
          SELECT ${accountId}::uuid, time_ordered_uuid(), ${callLog.requestId}, ${callLog.endpoint}, ${callLog.outcome},
            ${callLog.statusCode}, ${callLog.recordId}::uuid, ${callLog.entityKey}, ${callLog.source},
            ${toJson(callLog.warnings)}::jsonb, ${callLog.error}, ${callLog.items ? toJson(callLog.items) : null}::jsonb
          WHERE (SELECT count(*) FROM ins) = ${ids.length}
        )`
            : sql``
        }
        SELECT (SELECT (extract(epoch FROM min(created_at)) * 1000)::float8 FROM ins) AS created_ms,
          ARRAY(SELECT id FROM live WHERE NOT EXISTS (SELECT 1 FROM input WHERE input.id = live.id))::text[] AS taken,
          ARRAY(SELECT id FROM given WHERE NOT EXISTS (SELECT 1 FROM live WHERE live.id = given.id))::text[] AS revoked,
          ARRAY(SELECT id FROM input WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.id = input.id))::text[] AS refused
        ${PREPARED}`;
      // Without ON CONFLICT a record a unique rule refuses fails the whole statement, which then
      // runs again skipping such records. Skipping costs every row a look-up in each unique
      // index, a speculative insertion's lock and a WAL record confirming it: about an eighth of
      // the database's CPU a row of a 100-record call (docs/decisions.md, "Bulk without ON
      // CONFLICT first").
      let failedOnConflict = false;
      let result: QueryResult<CreatedManyRow>;
      try {
        result = await statement(!optimistic, inputJson).execute(db);
      } catch (error) {
        if (!again || !isUniqueViolation(error)) throw error;
        failedOnConflict = true;
        result = await statement(true, again).execute(db);
      }
      const created = new Map<string, Date>();
      const { created_ms: createdMs, taken, revoked, refused } = result.rows[0]!;
      const keyRevoked = new Set(revoked);
      const answerKeyTaken = new Set(taken);
      // One row, whatever the count of items: the ids that were not created, by why (usually
      // none), and the creation time the created rows share (now(), the transaction's start), as
      // epoch milliseconds (timestamptz(3) holds no more; a number is far cheaper for the driver
      // than a timestamp's text). A row for each created record cost the driver about 130 µs a
      // bulk call (docs/decisions.md, Bulk against its storage floor: a fifth less server work).
      if (createdMs !== null) {
        const createdAt = new Date(createdMs);
        const notCreated = new Set([...refused, ...taken, ...revoked]);
        for (const id of ids) {
          if (!notCreated.has(id)) created.set(id, createdAt);
        }
      }
      // The call's entry was written exactly when every item was created.
      return {
        created,
        keyRevoked,
        answerKeyTaken,
        logged: callLog !== null && created.size === ids.length,
        conflicted: failedOnConflict || refused.length > 0,
        runs: failedOnConflict ? 2 : 1,
      };
    },

    /** With its duplicate key and whether it holds it uniquely: an update may not take another's. */
    findByExternalId(accountId: string, entityId: string, externalId: string, tx: Executor = db) {
      return tx
        .selectFrom('records')
        .select([...RECORD_COLUMNS, 'dedupe_key', 'dedupe_unique'])
        .where('account_id', '=', accountId)
        .where('entity_id', '=', entityId)
        .where('external_id', '=', externalId)
        .modifyEnd(PREPARED)
        .executeTakeFirst();
    },

    /** How many records the entity has (a duplicate-key recompute's total). */
    async countOfEntity(accountId: string, entityId: string, tx: Executor = db): Promise<number> {
      const row = await tx
        .selectFrom('records')
        .select((eb) => eb.fn.countAll<number>().as('count'))
        .where('account_id', '=', accountId)
        .where('entity_id', '=', entityId)
        .executeTakeFirstOrThrow();
      return Number(row.count);
    },

    /** The next records of the entity in id order after `afterId`, with the values keys are made of. */
    valuesAfter(
      accountId: string,
      entityId: string,
      afterId: string | null,
      limit: number,
      tx: Executor = db,
    ) {
      let query = tx
        .selectFrom('records')
        .select(['id', 'fields'])
        .where('account_id', '=', accountId)
        .where('entity_id', '=', entityId);
      if (afterId !== null) query = query.where('id', '>', afterId);
      return query.orderBy('id').limit(limit).execute();
    },

    /**
     * Stores recomputed duplicate keys and lower-case emails (the email-role field's value that
     * notes look records up by). Of the records that want a unique key, one per key is
     * marked unique unless another record already holds that key uniquely; the others share it
     * outside the uniqueness rule, as a record created for a new external id does. The keys are
     * cleared of their uniqueness first, so that a key moving between records never collides
     * with itself. A record another transaction made unique meanwhile makes this fail with
     * 23505; the caller runs the batch again.
     */
    async rekey(
      accountId: string,
      entityId: string,
      rows: { id: string; dedupe_key: string | null; unique_wanted: boolean; email_lc: string | null }[],
      tx: Executor,
    ): Promise<void> {
      if (rows.length === 0) return;
      const items = sql`jsonb_to_recordset(${toJson(rows)}::jsonb)
        AS i(id uuid, dedupe_key text, unique_wanted boolean, email_lc text)`;
      await sql`
        UPDATE records AS r SET dedupe_key = i.dedupe_key, dedupe_unique = false, email_lc = i.email_lc
        FROM ${items}
        WHERE r.account_id = ${accountId} AND r.entity_id = ${entityId} AND r.id = i.id
          AND (r.dedupe_key IS DISTINCT FROM i.dedupe_key OR r.dedupe_unique
            OR r.email_lc IS DISTINCT FROM i.email_lc)`.execute(tx);
      await sql`
        UPDATE records AS r SET dedupe_unique = true
        FROM (SELECT DISTINCT ON (dedupe_key) id, dedupe_key FROM ${items}
              WHERE unique_wanted AND dedupe_key IS NOT NULL ORDER BY dedupe_key, id) AS w
        WHERE r.account_id = ${accountId} AND r.entity_id = ${entityId} AND r.id = w.id
          AND NOT EXISTS (
            SELECT 1 FROM records AS o
            WHERE o.account_id = ${accountId} AND o.entity_id = ${entityId}
              AND o.dedupe_key = w.dedupe_key AND o.dedupe_unique)`.execute(tx);
    },

    /**
     * The record that holds these duplicate-rule values under the uniqueness rule
     * (`records_dedupe_unique`), other than `exceptId`; undefined when none does.
     */
    uniqueHolderOf(
      accountId: string,
      entityId: string,
      dedupeKey: string,
      exceptId: string,
      tx: Executor = db,
    ) {
      // `dedupe_unique` as written in the index's condition, so that a generic plan can use it.
      return tx
        .selectFrom('records')
        .select('id')
        .where('account_id', '=', accountId)
        .where('entity_id', '=', entityId)
        .where('dedupe_key', '=', dedupeKey)
        .where(sql<boolean>`dedupe_unique`)
        .where('id', '<>', exceptId)
        .limit(1)
        .modifyEnd(PREPARED)
        .executeTakeFirst();
    },

    /**
     * The oldest record with these duplicate-rule values. A record is in one of two partial
     * indexes (migration 0033): `records_dedupe_unique` while a unique rule holds its key,
     * `records_dedupe_shared` otherwise; each half names its index's condition as written there
     * (a bound `false` would not prove it in a generic plan, which then reads the table).
     */
    findByDedupeKey(accountId: string, entityId: string, dedupeKey: string, tx: Executor = db) {
      const withKey = () =>
        tx
          .selectFrom('records')
          .select(RECORD_COLUMNS)
          .where('account_id', '=', accountId)
          .where('entity_id', '=', entityId)
          .where('dedupe_key', '=', dedupeKey);
      return withKey()
        .where(sql<boolean>`dedupe_unique`)
        .unionAll(withKey().where(sql<boolean>`NOT dedupe_unique`))
        .orderBy('created_at')
        .limit(1)
        .modifyEnd(PREPARED)
        .executeTakeFirst();
    },

    find(accountId: string, id: string, tx: Executor = db) {
      return tx
        .selectFrom('records')
        .select(RECORD_COLUMNS)
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .modifyEnd(PREPARED)
        .executeTakeFirst();
    },

    insert(accountId: string, row: NewRecordRow, tx: Executor = db) {
      return tx
        .insertInto('records')
        .values({
          account_id: accountId,
          id: row.id,
          entity_id: row.entityId,
          name: row.name,
          fields: toJson(row.fields),
          source: row.source,
          source_id: row.sourceId,
          origin: toJson(row.origin),
          external_id: row.externalId,
          email_lc: row.emailLc,
          dedupe_key: row.dedupeKey,
          dedupe_unique: row.dedupeUnique,
          duplicate_of: row.duplicateOf,
          pipeline_id: row.pipelineId,
          stage_id: row.stageId,
          stage_entered_at: row.stageId ? new Date() : null,
          assignee_id: row.assigneeId,
          viewer_ids: row.viewerIds,
          created_by: row.createdBy,
        })
        .returning(['id', 'created_at', 'updated_at'])
        .executeTakeFirstOrThrow();
    },

    updateValues(
      accountId: string,
      id: string,
      values: {
        fields: Record<string, unknown>;
        name: string;
        emailLc: string | null;
        dedupeKey: string | null;
        /** A handover's assignee replaces the record's (S1 intake); absent leaves it. */
        assigneeId?: string | null;
        /** A handover's viewers join the record's, each once, at most 100 in all. */
        viewerIds?: string[];
      },
      tx: Executor = db,
    ) {
      const viewerIds = values.viewerIds ?? [];
      return tx
        .updateTable('records')
        .set({
          fields: toJson(values.fields),
          name: values.name,
          email_lc: values.emailLc,
          dedupe_key: values.dedupeKey,
          updated_at: new Date(),
          ...(values.assigneeId ? { assignee_id: values.assigneeId } : {}),
          ...(viewerIds.length > 0
            ? {
                viewer_ids: sql<string[]>`ARRAY(
                  SELECT v FROM unnest(viewer_ids || ${viewerIds}::uuid[]) WITH ORDINALITY AS t(v, n)
                  GROUP BY v ORDER BY min(n) LIMIT 100)`,
              }
            : {}),
        })
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .returning(['id', 'source', 'created_at', 'updated_at'])
        .executeTakeFirstOrThrow();
    },

    /**
     * Marks a record changed by something beside its values (documents attached), so that a
     * poller of `updated_since` sees it, as it sees a change of values.
     */
    async touch(accountId: string, id: string, tx: Executor = db) {
      await tx
        .updateTable('records')
        .set({ updated_at: new Date() })
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .execute();
    },

    async insertEvents(accountId: string, events: RecordEventInput[], tx: Executor = db) {
      if (events.length === 0) return;
      await tx
        .insertInto('record_events')
        .values(
          events.map((event) => ({
            account_id: accountId,
            id: timeOrderedId(),
            record_id: event.recordId,
            type: event.type,
            message: event.message,
            actor: event.actor ?? 'api',
            data: toJson(event.data ?? {}),
          })),
        )
        .execute();
    },

    /**
     * Notes without an idempotency key, each for the one record it names (`recordId`) or whose
     * email-role value is `emailLc`, either of `entityId` when given, with their `note_added` events,
     * in one statement: notes of one account that arrive together are one round trip. An item
     * with `uncheckedKeyId` (an API key taken from memory) is acted on only while that key is
     * unrevoked. Answers one result per item, in order: whether its key is live, the ids that
     * matched (at most 20, oldest first) and, when exactly one did, the note's `created_at`.
     */
    async addNotesByMatch(
      accountId: string,
      items: {
        noteId: string;
        uncheckedKeyId: string | null;
        recordId: string | null;
        emailLc: string | null;
        entityId: string | null;
        kind: string;
        body: string;
        tag: string | null;
        senderName: string | null;
        event: { message: string; actor: string; data: Record<string, unknown> };
      }[],
      tx: Executor = db,
    ): Promise<{ keyLive: boolean; matches: string[]; createdAt: Date | null }[]> {
      const given = items.map((item, ord) => ({
        ord,
        id: item.noteId,
        key_id: item.uncheckedKeyId,
        record_id: item.recordId,
        email_lc: item.emailLc,
        entity_id: item.entityId,
        kind: item.kind,
        body: item.body,
        tag: item.tag,
        sender_name: item.senderName,
        message: item.event.message,
        actor: item.event.actor,
        data: item.event.data,
      }));
      const result = await sql<{
        ord: number;
        key_live: boolean;
        ids: string[] | null;
        created_at: Date | null;
      }>`
        WITH given AS (
          SELECT g.*, g.key_id IS NULL OR EXISTS (
            SELECT 1 FROM api_keys k WHERE k.account_id = ${accountId} AND k.id = g.key_id AND k.revoked_at IS NULL
          ) AS key_live
          FROM jsonb_to_recordset(${toJson(given)}::jsonb) AS g(ord int, id uuid, key_id uuid, record_id uuid,
            email_lc text, entity_id uuid, kind text, body text, tag text, sender_name text, message text,
            actor text, data jsonb)
        ), matched AS (
          SELECT given.ord, found.ids FROM given
          LEFT JOIN LATERAL (
            SELECT array_agg(m.id ORDER BY m.created_at, m.id) AS ids FROM (
              SELECT r.id, r.created_at FROM records r
              WHERE given.key_live AND given.record_id IS NOT NULL AND r.account_id = ${accountId}
                AND r.id = given.record_id AND (given.entity_id IS NULL OR r.entity_id = given.entity_id)
              UNION ALL (
                ${emailMatches(accountId, sql`given.email_lc`, sql`given.entity_id`, 20, sql`given.key_live AND given.record_id IS NULL`)}
              )
            ) AS m
          ) AS found ON true
        ), note AS (
          INSERT INTO notes (account_id, id, record_id, kind, body, tag, sender_name)
          SELECT ${accountId}, given.id, matched.ids[1], given.kind, given.body, given.tag, given.sender_name
          FROM given JOIN matched USING (ord) WHERE cardinality(matched.ids) = 1
          RETURNING id, record_id, created_at
        ), added AS (
          INSERT INTO record_events (account_id, id, record_id, type, message, actor, data)
          SELECT ${accountId}, time_ordered_uuid(), note.record_id, 'note_added', given.message, given.actor, given.data
          FROM note JOIN given ON given.id = note.id
        )
        SELECT given.ord, given.key_live, matched.ids, note.created_at
        FROM given JOIN matched USING (ord) LEFT JOIN note ON note.id = given.id
        ORDER BY given.ord ${PREPARED}`.execute(tx);
      return result.rows.map((row) => ({
        keyLive: row.key_live,
        matches: row.ids ?? [],
        createdAt: row.created_at,
      }));
    },

    /** One note with its `note_added` event, in one statement (one round trip, no transaction). */
    async insertNoteWithEvent(
      accountId: string,
      note: NoteInput,
      /** `actor` as stored in the history (see records.service `actorOf`); the API by default. */
      event: { message: string; data: Record<string, unknown>; actor?: string },
      tx: Executor = db,
    ) {
      const result = await sql<{ id: string; record_id: string; kind: string; created_at: Date }>`
        WITH note AS (
          INSERT INTO notes (account_id, id, record_id, kind, body, tag, sender_name, idempotency_key, request_hash)
          VALUES (${accountId}, ${timeOrderedId()}, ${note.recordId}, ${note.kind}, ${note.body}, ${note.tag ?? null},
            ${note.senderName ?? null}, ${note.idempotencyKey ?? null}, ${note.requestHash ?? null})
          RETURNING id, record_id, kind, created_at
        ), added AS (
          INSERT INTO record_events (account_id, id, record_id, type, message, actor, data)
          SELECT ${accountId}, time_ordered_uuid(), note.record_id, 'note_added', ${event.message}, ${event.actor ?? 'api'},
            ${toJson(event.data)}::jsonb
          FROM note
        )
        SELECT id, record_id, kind, created_at FROM note ${PREPARED}`.execute(tx);
      return result.rows[0]!;
    },

    async insertNotes(accountId: string, notes: NoteInput[], tx: Executor = db) {
      if (notes.length === 0) return [];
      return tx
        .insertInto('notes')
        .values(
          notes.map((note) => ({
            account_id: accountId,
            id: timeOrderedId(),
            record_id: note.recordId,
            kind: note.kind,
            body: note.body,
            tag: note.tag ?? null,
            sender_name: note.senderName ?? null,
            idempotency_key: note.idempotencyKey ?? null,
          })),
        )
        .returning(['id', 'record_id', 'kind', 'created_at'])
        .execute();
    },
  };
}

export type RecordsRepo = ReturnType<typeof createRecordsRepo>;

/** Records with their entity key and stage names: the shape every record answer is built from. */
/** Filters of the record list (`GET /api/v1/records`); upper time bounds are exclusive. */
export interface RecordsListFilter {
  entityId?: string;
  updatedSince?: Date;
  createdFrom?: Date;
  createdBefore?: Date;
  stage?: string;
  pipeline?: string;
  source?: string;
  /** Contained in the name or the email address, any case. */
  text?: string;
}

/** A LIKE pattern matching `text` literally (backslash is the default escape character). */
function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

function selectFullRecords(tx: Executor, accountId: string) {
  return tx
    .selectFrom('records')
    .innerJoin('entities', (join) =>
      join
        .onRef('entities.account_id', '=', 'records.account_id')
        .onRef('entities.id', '=', 'records.entity_id'),
    )
    .leftJoin('pipelines', (join) =>
      join
        .onRef('pipelines.account_id', '=', 'records.account_id')
        .onRef('pipelines.id', '=', 'records.pipeline_id'),
    )
    .leftJoin('stages', (join) =>
      join.onRef('stages.account_id', '=', 'records.account_id').onRef('stages.id', '=', 'records.stage_id'),
    )
    .select([
      'records.id',
      'records.entity_id',
      'entities.key as entity_key',
      'records.name',
      'records.fields',
      'records.source',
      'records.origin',
      'records.external_id',
      'records.stage_id',
      'records.stage_entered_at',
      'pipelines.name as pipeline_name',
      'stages.name as stage_name',
      'records.created_at',
      'records.updated_at',
    ])
    .where('records.account_id', '=', accountId);
}

/** A row of `selectFullRecords`. */
type FullRecordRow = Awaited<ReturnType<ReturnType<typeof selectFullRecords>['executeTakeFirstOrThrow']>>;

/** A record's document as the one-statement read lists it (JSON: `size` is a number). */
export interface DocumentJson {
  id: string;
  name: string;
  mime: string;
  size: number;
  field: string | null;
}

export type FullRecordWithDocuments = FullRecordRow & { documents: DocumentJson[] };

/** Reading and changing records, for the records endpoints. */
export function createRecordsReadRepo(db: Executor) {
  return {
    /** The record with its entity key and stage names, or undefined. */
    findFull(accountId: string, id: string, tx: Executor = db) {
      return selectFullRecords(tx, accountId)
        .where('records.id', '=', id)
        .modifyEnd(PREPARED)
        .executeTakeFirst();
    },

    /**
     * Records as `findFull` reads them, with their documents, each with the check of the API key
     * taken from memory that asks for it (`uncheckedKeyId`, null when the key was looked up), in
     * one statement: reads of one account that arrive together are one round trip. Answers one
     * result per item, in order; `keyLive` false: the key was revoked and nothing was read.
     */
    async findManyFullWithDocuments(
      accountId: string,
      items: { id: string; uncheckedKeyId: string | null }[],
      tx: Executor = db,
    ): Promise<{ keyLive: boolean; record: FullRecordWithDocuments | undefined }[]> {
      const wanted = items.map((item, ord) => ({ ord, id: item.id, key_id: item.uncheckedKeyId }));
      const result = await sql<
        { ord: number; key_live: boolean } & { [K in keyof FullRecordRow]: FullRecordRow[K] | null } & {
          documents: DocumentJson[] | null;
        }
      >`
        WITH wanted AS (
          SELECT w.ord, w.id, w.key_id IS NULL OR EXISTS (
            SELECT 1 FROM api_keys k WHERE k.account_id = ${accountId} AND k.id = w.key_id AND k.revoked_at IS NULL
          ) AS key_live
          FROM jsonb_to_recordset(${toJson(wanted)}::jsonb) AS w(ord int, id uuid, key_id uuid)
        )
        SELECT wanted.ord, wanted.key_live, found.* FROM wanted
        -- LIMIT keeps the subquery a probe of the primary key per item: joined freely, the
        -- generic plan (made for any number of items) hashes whole tables.
        LEFT JOIN LATERAL (
          SELECT r.id, r.entity_id, e.key AS entity_key, r.name, r.fields, r.source, r.origin, r.external_id,
            r.stage_id, r.stage_entered_at, p.name AS pipeline_name, s.name AS stage_name, r.created_at, r.updated_at,
            (SELECT coalesce(json_agg(json_build_object('id', d.id, 'name', d.name, 'mime', d.mime, 'size', d.size,
              'field', d.field) ORDER BY d.created_at, d.id), '[]')
             FROM documents d WHERE d.account_id = r.account_id AND d.record_id = r.id) AS documents
          FROM records r
          JOIN entities e ON e.account_id = r.account_id AND e.id = r.entity_id
          LEFT JOIN pipelines p ON p.account_id = r.account_id AND p.id = r.pipeline_id
          LEFT JOIN stages s ON s.account_id = r.account_id AND s.id = r.stage_id
          WHERE wanted.key_live AND r.account_id = ${accountId} AND r.id = wanted.id
          LIMIT 1
        ) AS found ON true
        ORDER BY wanted.ord
        ${PREPARED}`.execute(tx);
      return result.rows.map((row) => {
        if (!row.key_live) return { keyLive: false, record: undefined };
        if (row.id === null) return { keyLive: true, record: undefined };
        const { ord: _ord, key_live: _live, documents, ...record } = row;
        return { keyLive: true, record: { ...(record as FullRecordRow), documents: documents ?? [] } };
      });
    },

    /** Records changed at or after `updatedSince`, oldest change first, after the cursor position. */
    list(
      accountId: string,
      filter: RecordsListFilter,
      order: 'updated' | 'newest',
      limit: number,
      after: { at: string; id: string } | null,
      tx: Executor = db,
    ) {
      let query = selectFullRecords(tx, accountId);
      if (filter.entityId) query = query.where('records.entity_id', '=', filter.entityId);
      if (filter.updatedSince) query = query.where('records.updated_at', '>=', filter.updatedSince);
      if (filter.createdFrom) query = query.where('records.created_at', '>=', filter.createdFrom);
      if (filter.createdBefore) query = query.where('records.created_at', '<', filter.createdBefore);
      if (filter.stage !== undefined) query = query.where('stages.name', '=', filter.stage);
      if (filter.pipeline !== undefined) query = query.where('pipelines.name', '=', filter.pipeline);
      if (filter.source !== undefined) query = query.where('records.source', '=', filter.source);
      if (filter.text !== undefined) {
        // Compared in Unicode's composed form on both sides (lib/text.ts, matchingForm): `ü` typed
        // as one character finds a name stored with `u` + U+0308, and the other way round.
        const composed = filter.text.normalize('NFC');
        const pattern = `%${escapeLike(composed)}%`;
        const lower = `%${escapeLike(composed.toLowerCase())}%`;
        query = query.where((eb) =>
          eb.or([
            eb(sql<string>`normalize(records.name, NFC)`, 'ilike', pattern),
            eb(sql<string>`normalize(records.email_lc, NFC)`, 'like', lower),
          ]),
        );
      }
      if (order === 'newest') {
        if (after) {
          query = query.where(pastCursor('records.created_at', 'records.id', 'before', after.at, after.id));
        }
        return query
          .orderBy('records.created_at', 'desc')
          .orderBy('records.id', 'desc')
          .limit(limit)
          .execute();
      }
      if (after) {
        query = query.where(pastCursor('records.updated_at', 'records.id', 'after', after.at, after.id));
      }
      return query.orderBy('records.updated_at').orderBy('records.id').limit(limit).execute();
    },

    documentsOf(accountId: string, recordIds: string[], tx: Executor = db) {
      if (recordIds.length === 0) return Promise.resolve([]);
      return (
        tx
          .selectFrom('documents')
          .select(['id', 'record_id', 'name', 'mime', 'size', 'field', 'created_at'])
          .where('account_id', '=', accountId)
          // One array parameter rather than an `in` list: one fixed text, prepared.
          .where('record_id', '=', sql<string>`any(${recordIds}::uuid[])`)
          .orderBy('created_at')
          .orderBy('id')
          .modifyEnd(PREPARED)
          .execute()
      );
    },

    /**
     * A record's latest history entries, newest first. Its creation is not a stored event: the
     * record row holds when and from which source it came in, and the entry `lead_created` is
     * made from it here, older than any stored event of the same instant.
     */
    async latestEvents(accountId: string, recordId: string, limit: number, tx: Executor = db) {
      const result = await sql<{ type: string; message: string; created_at: Date }>`
        SELECT type, message, created_at FROM (
          SELECT type, message, created_at, 1 AS kind, id FROM record_events
          WHERE account_id = ${accountId} AND record_id = ${recordId}
          UNION ALL
          SELECT 'lead_created', 'Created from ' || source, created_at, 0, id FROM records
          WHERE account_id = ${accountId} AND id = ${recordId}
        ) AS history
        ORDER BY created_at DESC, kind DESC, id DESC
        LIMIT ${limit} ${PREPARED}`.execute(tx);
      return result.rows;
    },

    /**
     * One page of a record's history, newest first, after the cursor position (`created_at`,
     * `id` of the last entry shown). The creation is made from the row (see `latestEvents`); it is
     * the oldest entry, so a cursor at it (the record's own id) ends the history.
     */
    async historyPage(
      accountId: string,
      recordId: string,
      limit: number,
      after: { createdAt: string; id: string } | null,
      tx: Executor = db,
    ) {
      if (after?.id === recordId) return [];
      const at = after ? new Date(after.createdAt) : null;
      const result = await sql<{
        id: string;
        type: string;
        message: string;
        actor: string;
        data: Record<string, unknown>;
        created_at: Date;
      }>`
        SELECT id, type, message, actor, data, created_at FROM (
          SELECT id, type, message, actor, data, created_at, 1 AS kind FROM record_events
          WHERE account_id = ${accountId} AND record_id = ${recordId}
          UNION ALL
          SELECT id, 'lead_created', 'Created from ' || source,
            COALESCE(created_by, CASE WHEN source_id IS NULL THEN 'api' ELSE 'source:' || source END),
            jsonb_build_object('source', source), created_at, 0 FROM records
          WHERE account_id = ${accountId} AND id = ${recordId}
        ) AS history
        WHERE ${at}::timestamptz IS NULL OR (created_at, kind, id) < (${at}::timestamptz, 1, ${after?.id ?? null}::uuid)
        ORDER BY created_at DESC, kind DESC, id DESC
        LIMIT ${limit} ${PREPARED}`.execute(tx);
      return result.rows;
    },

    /** A record's stays in stages, newest first: the current one (from the row) and those that ended. */
    async stays(accountId: string, recordId: string, limit: number, tx: Executor = db) {
      const result = await sql<{ pipeline: string; stage: string; entered_at: Date; left_at: Date | null }>`
        SELECT p.name AS pipeline, s.name AS stage, stay.entered_at, stay.left_at FROM (
          SELECT pipeline_id, stage_id, stage_entered_at AS entered_at, NULL::timestamptz(3) AS left_at FROM records
          WHERE account_id = ${accountId} AND id = ${recordId} AND stage_id IS NOT NULL
          UNION ALL
          SELECT pipeline_id, stage_id, entered_at, left_at FROM stage_history
          WHERE account_id = ${accountId} AND record_id = ${recordId}
        ) AS stay
        JOIN stages s ON s.account_id = ${accountId} AND s.id = stay.stage_id
        JOIN pipelines p ON p.account_id = ${accountId} AND p.id = stay.pipeline_id
        ORDER BY stay.entered_at DESC, stay.left_at DESC NULLS FIRST
        LIMIT ${limit} ${PREPARED}`.execute(tx);
      return result.rows;
    },

    /** Locks the record row for a read-modify-write of its values. */
    lockForUpdate(accountId: string, id: string, tx: Executor) {
      return tx
        .selectFrom('records')
        .select(['id', 'entity_id', 'fields'])
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .forUpdate()
        .modifyEnd(PREPARED)
        .executeTakeFirst();
    },

    /** Records whose email-role value is this address (lower-cased), optionally of one entity. */
    async findByEmail(
      accountId: string,
      emailLc: string,
      entityId: string | undefined,
      limit: number,
      tx: Executor = db,
    ) {
      const result = await sql<{
        id: string;
      }>`SELECT id FROM (${emailMatches(accountId, emailLc, entityId ?? null, limit)}) AS found
        ${PREPARED}`.execute(tx);
      return result.rows;
    },

    insertRecordToken(
      accountId: string,
      token: { id: string; recordId: string; tokenHash: Buffer; fields: string[]; expiresAt: Date },
      tx: Executor = db,
    ) {
      return tx
        .insertInto('record_tokens')
        .values({
          account_id: accountId,
          id: token.id,
          record_id: token.recordId,
          token_hash: token.tokenHash,
          fields: token.fields,
          expires_at: token.expiresAt,
        })
        .returning(['expires_at'])
        .executeTakeFirstOrThrow();
    },

    findNoteByIdempotencyKey(accountId: string, key: string, tx: Executor = db) {
      return tx
        .selectFrom('notes')
        .select(['id', 'record_id', 'kind', 'body', 'created_at', 'request_hash'])
        .where('account_id', '=', accountId)
        .where('idempotency_key', '=', key)
        .modifyEnd(PREPARED)
        .executeTakeFirst();
    },
  };
}

export type RecordsReadRepo = ReturnType<typeof createRecordsReadRepo>;

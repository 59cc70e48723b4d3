import { sql } from 'kysely';
import { toJson } from '../db/json.ts';
import { pastCursor } from '../db/keyset.ts';
import { PREPARED } from '../db/prepared.ts';
import { lockNamed } from '../db/transaction.ts';
import type { Executor } from '../db/types.ts';

export interface NewMessageRow {
  id: string;
  channel: 'webhook' | 'email';
  destinationId: string | null;
  eventType: string;
  payload: unknown;
  maxAttempts?: number | null;
  notify?: string | null;
  ref?: string | null;
  /** What sent it, when its attempts are listed by that (an automation). */
  originId?: string | null;
  /** Not due before this (a message this process sends itself at once). */
  notBefore?: Date;
}

/** A message claimed for one attempt, with its destination (webhooks). */
export interface ClaimedMessage {
  account_id: string;
  id: string;
  channel: 'webhook' | 'email';
  destination_id: string | null;
  event_type: string;
  payload: unknown;
  attempts: number;
  max_attempts: number | null;
  notify: string | null;
  ref: string | null;
  created_at: Date;
  url: string | null;
  secret: string | null;
  previous_secret: string | null;
  enabled: boolean | null;
}

export interface FinishedAttempt {
  accountId: string;
  messageId: string;
  claimId: string;
  destinationId: string | null;
  attempt: number;
  /** `pending` again (a retry is due at `nextAttemptAt`), or final. */
  status: 'pending' | 'delivered' | 'failed';
  nextAttemptAt: Date | null;
  ok: boolean;
  statusCode: number | null;
  reply: string | null;
  error: string | null;
  durationMs: number;
  /** The receiver answered 410: the destination is disabled now. */
  gone: boolean;
  /** A destination failing since longer than this is disabled (ms). */
  disableAfterMs: number;
}

const DESTINATION_COLUMNS = [
  'id',
  'purpose',
  'url',
  'events',
  'description',
  'enabled',
  'disabled_reason',
  'failing_since',
  'previous_secret_until',
  'created_at',
  'updated_at',
] as const;

/** Whose attempts a listing reads: a destination's, an origin's (an automation), or one message's. */
export type AttemptsOf = { destinationId: string } | { originId: string } | { messageId: string };

/** One attempt as the attempts listing reads it. */
export interface AttemptRow {
  id: string;
  message_id: string;
  event_type: string;
  attempt: number;
  outcome: string;
  status_code: number | null;
  reply: string | null;
  error: string | null;
  duration_ms: number;
  created_at: Date;
}

/** The claim statement's common part: due rows (or one row) leased to `claimId`, with their destination. */
function claimStatement(
  filter: ReturnType<typeof sql>,
  limit: number,
  leaseMs: number,
  claimId: string,
  prepared = sql``,
) {
  return sql<ClaimedMessage>`
    WITH due AS (
      SELECT account_id, id FROM outbound_messages
      WHERE status = 'pending' AND (claimed_until IS NULL OR claimed_until <= now()) AND ${filter}
      ORDER BY next_attempt_at
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED
    ), claimed AS (
      UPDATE outbound_messages m
      SET claim_id = ${claimId}::uuid, attempts = m.attempts + 1,
        claimed_until = now() + ${leaseMs}::int * interval '1 millisecond'
      FROM due WHERE m.account_id = due.account_id AND m.id = due.id
      RETURNING m.account_id, m.id, m.channel, m.destination_id, m.event_type, m.payload, m.attempts,
        m.max_attempts, m.notify, m.ref, m.created_at
    )
    SELECT claimed.*, d.url, d.secret,
      CASE WHEN d.previous_secret_until > now() THEN d.previous_secret END AS previous_secret, d.enabled
    FROM claimed LEFT JOIN webhook_destinations d
      ON d.account_id = claimed.account_id AND d.id = claimed.destination_id ${prepared}`;
}

export function createOutboundRepo(db: Executor) {
  return {
    async insertMessages(accountId: string, rows: NewMessageRow[], tx: Executor = db) {
      if (rows.length === 0) return;
      await tx
        .insertInto('outbound_messages')
        .values(
          rows.map((row) => ({
            account_id: accountId,
            id: row.id,
            channel: row.channel,
            destination_id: row.destinationId,
            event_type: row.eventType,
            payload: toJson(row.payload),
            max_attempts: row.maxAttempts ?? null,
            notify: row.notify ?? null,
            ref: row.ref ?? null,
            origin_id: row.originId ?? null,
            next_attempt_at: row.notBefore ?? sql<Date>`now()`,
          })),
        )
        .execute();
    },

    /**
     * Leases up to `limit` due messages of every account to this claim (instance-wide, like
     * maintenance): rows other senders hold are skipped, and a lease that runs out (its sender
     * died) makes the row due again.
     */
    async claimDue(limit: number, leaseMs: number, claimId: string) {
      const result = await claimStatement(
        sql`next_attempt_at <= now()`,
        limit,
        leaseMs,
        claimId,
        PREPARED,
      ).execute(db);
      return result.rows;
    },

    /** Leases one message now, due or not, unless another sender holds it. */
    async claimOne(accountId: string, id: string, leaseMs: number, claimId: string) {
      const result = await claimStatement(
        sql`account_id = ${accountId}::uuid AND id = ${id}::uuid`,
        1,
        leaseMs,
        claimId,
      ).execute(db);
      return result.rows[0];
    },

    /**
     * Writes one attempt's outcome in one statement: the message's state (only while this claim
     * still holds it), the attempt row, and the destination's failure clock (untouched on the
     * common success, so that concurrent successes do not queue on the destination's row).
     * Answers false when the claim was lost (its lease ran out and another sender took over).
     */
    async finishAttempt(attempt: FinishedAttempt, tx: Executor = db): Promise<boolean> {
      const result = await sql<{ id: string }>`
        WITH msg AS (
          UPDATE outbound_messages
          SET status = ${attempt.status}, claim_id = NULL, claimed_until = NULL, last_error = ${attempt.error},
            next_attempt_at = coalesce(${attempt.nextAttemptAt}::timestamptz, next_attempt_at),
            finished_at = CASE WHEN ${attempt.status} = 'pending' THEN NULL ELSE now() END
          WHERE account_id = ${attempt.accountId}::uuid AND id = ${attempt.messageId}::uuid
            AND claim_id = ${attempt.claimId}::uuid
          RETURNING account_id, id, origin_id
        ), att AS (
          INSERT INTO outbound_attempts (account_id, id, message_id, destination_id, origin_id, attempt, outcome,
            status_code, reply, error, duration_ms)
          SELECT account_id, time_ordered_uuid(), id, ${attempt.destinationId}::uuid, origin_id, ${attempt.attempt},
            ${attempt.ok ? 'delivered' : 'failed'}, ${attempt.statusCode}::int, ${attempt.reply}, ${attempt.error},
            ${attempt.durationMs}::int
          FROM msg
        ), dest AS (
          UPDATE webhook_destinations d
          SET failing_since = CASE WHEN ${attempt.ok} THEN NULL ELSE coalesce(d.failing_since, now()) END,
            enabled = CASE
              WHEN ${attempt.gone} THEN false
              WHEN NOT ${attempt.ok} AND d.failing_since <= now() - ${attempt.disableAfterMs}::bigint * interval '1 millisecond' THEN false
              ELSE d.enabled END,
            disabled_reason = CASE
              WHEN NOT d.enabled THEN d.disabled_reason
              WHEN ${attempt.gone} THEN 'gone'
              WHEN NOT ${attempt.ok} AND d.failing_since <= now() - ${attempt.disableAfterMs}::bigint * interval '1 millisecond' THEN 'failing'
              ELSE NULL END,
            -- Being switched off is a change of the webhook as much as a PATCH's.
            updated_at = CASE
              WHEN d.enabled AND (${attempt.gone} OR (NOT ${attempt.ok}
                AND d.failing_since <= now() - ${attempt.disableAfterMs}::bigint * interval '1 millisecond')) THEN now()
              ELSE d.updated_at END
          FROM msg
          WHERE d.account_id = msg.account_id AND d.id = ${attempt.destinationId}::uuid
            AND (NOT ${attempt.ok} OR d.failing_since IS NOT NULL)
        )
        SELECT id FROM msg ${PREPARED}`.execute(tx);
      return result.rows.length > 0;
    },

    /**
     * Writes successful attempts of many messages in one statement: each message delivered while
     * its claim holds it, with the attempt's outcome kept on the message row (no attempt row; the
     * attempts listing reads it from there), and the failure clock of a destination that was
     * failing cleared. Answers the ids of the messages written; the others' claims were lost. One
     * statement for a batch, not one per message, and one row written per message: at intake's
     * pace the statements and the rows, not the sends, were most of the engine's cost.
     */
    async finishDelivered(attempts: FinishedAttempt[], tx: Executor = db): Promise<Set<string>> {
      if (attempts.length === 0) return new Set();
      const input = attempts.map((attempt) => ({
        account_id: attempt.accountId,
        message_id: attempt.messageId,
        claim_id: attempt.claimId,
        destination_id: attempt.destinationId,
        status_code: attempt.statusCode,
        reply: attempt.reply,
        duration_ms: attempt.durationMs,
      }));
      const result = await sql<{ id: string }>`
        WITH input AS (
          SELECT * FROM jsonb_to_recordset(${toJson(input)}::jsonb) AS x(account_id uuid, message_id uuid,
            claim_id uuid, destination_id uuid, status_code int, reply text, duration_ms int)
        ), msg AS (
          UPDATE outbound_messages m
          SET status = 'delivered', claim_id = NULL, claimed_until = NULL, last_error = NULL, finished_at = now(),
            status_code = input.status_code, reply = input.reply, duration_ms = input.duration_ms
          FROM input
          WHERE m.account_id = input.account_id AND m.id = input.message_id AND m.claim_id = input.claim_id
          RETURNING m.account_id, m.id, m.destination_id
        ), dest AS (
          UPDATE webhook_destinations d
          SET failing_since = NULL, disabled_reason = CASE WHEN NOT d.enabled THEN d.disabled_reason END
          WHERE d.failing_since IS NOT NULL AND (d.account_id, d.id) IN (SELECT account_id, destination_id FROM msg)
        )
        SELECT id FROM msg ${PREPARED}`.execute(tx);
      return new Set(result.rows.map((row) => row.id));
    },

    /**
     * Requeues for one more attempt each, due now, the failed messages to a destination that were
     * written within [since, until): at most `limit`, oldest first. Found through their failed
     * attempts (every failed message has one: the destination's attempt index), so that no index
     * on the messages is added for this. A test message, and a message whose module follows its
     * outcome (`notify`), is left as it is. Answers the ids requeued and whether more wait.
     */
    async requeueFailed(
      accountId: string,
      destinationId: string,
      window: { since: Date; until: Date },
      limit: number,
      tx: Executor = db,
    ): Promise<{ ids: string[]; more: boolean }> {
      const result = await sql<{ id: string; more: boolean }>`
        WITH candidates AS (
          SELECT DISTINCT message_id FROM outbound_attempts
          WHERE account_id = ${accountId}::uuid AND destination_id = ${destinationId}::uuid
            AND outcome = 'failed' AND created_at >= ${window.since}::timestamptz
        ), failed AS (
          SELECT m.account_id, m.id, m.created_at FROM outbound_messages m
          JOIN candidates c ON m.id = c.message_id
          WHERE m.account_id = ${accountId}::uuid AND m.destination_id = ${destinationId}::uuid
            AND m.status = 'failed' AND m.notify IS NULL AND m.event_type <> 'webhook.test'
            AND m.created_at >= ${window.since}::timestamptz AND m.created_at < ${window.until}::timestamptz
        ), picked AS (
          SELECT account_id, id FROM failed ORDER BY created_at, id LIMIT ${limit}
        ), requeued AS (
          UPDATE outbound_messages m
          SET status = 'pending', next_attempt_at = now(), finished_at = NULL, claim_id = NULL,
            claimed_until = NULL, max_attempts = m.attempts + 1
          FROM picked
          WHERE m.account_id = picked.account_id AND m.id = picked.id AND m.status = 'failed'
          RETURNING m.id
        )
        SELECT id, (SELECT count(*) FROM failed) > ${limit} AS more FROM requeued`.execute(tx);
      const more = result.rows[0]?.more ?? false;
      return { ids: result.rows.map((row) => row.id), more };
    },

    /**
     * Ends pending messages without another attempt (their purpose is gone, such as a retired
     * partner's deliveries): failed with `error`. A message a sender holds is taken from it too;
     * that sender's attempt then finds its claim lost and writes nothing. Answers the ids ended.
     */
    async failPendingMessages(accountId: string, ids: string[], error: string, tx: Executor = db) {
      if (ids.length === 0) return [];
      const rows = await tx
        .updateTable('outbound_messages')
        .set({
          status: 'failed',
          claim_id: null,
          claimed_until: null,
          last_error: error,
          finished_at: sql<Date>`now()`,
        })
        .where('account_id', '=', accountId)
        .where('id', 'in', ids)
        .where('status', '=', 'pending')
        .returning('id')
        .execute();
      return rows.map((row) => row.id);
    },

    findMessage(accountId: string, id: string, tx: Executor = db) {
      return tx
        .selectFrom('outbound_messages')
        .select([
          'id',
          'channel',
          'destination_id',
          'event_type',
          'status',
          'attempts',
          'last_error',
          'created_at',
          'finished_at',
        ])
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .executeTakeFirst();
    },

    /** Deletes messages (and with them their attempts) older than `before`, in short statements. */
    async pruneMessages(before: Date, batchSize: number): Promise<number> {
      let deleted = 0;
      for (;;) {
        const result = await sql`
          DELETE FROM outbound_messages WHERE (account_id, id) IN (
            SELECT account_id, id FROM outbound_messages WHERE created_at < ${before} LIMIT ${batchSize})`.execute(
          db,
        );
        const batch = Number(result.numAffectedRows ?? 0);
        deleted += batch;
        if (batch < batchSize) return deleted;
      }
    },

    // Destinations.

    insertDestination(
      accountId: string,
      row: {
        id: string;
        purpose: string;
        url: string;
        secret: string;
        events: string[];
        description: string | null;
      },
      tx: Executor = db,
    ) {
      return tx
        .insertInto('webhook_destinations')
        .values({ account_id: accountId, ...row })
        .returning(DESTINATION_COLUMNS)
        .executeTakeFirstOrThrow();
    },

    listDestinations(
      accountId: string,
      purpose: string,
      limit: number,
      after: { createdAt: string; id: string } | null,
      tx: Executor = db,
    ) {
      let query = tx
        .selectFrom('webhook_destinations')
        .select(DESTINATION_COLUMNS)
        .where('account_id', '=', accountId)
        .where('purpose', '=', purpose);
      if (after) {
        query = query.where(pastCursor('created_at', 'id', 'after', after.createdAt, after.id));
      }
      return query.orderBy('created_at').orderBy('id').limit(limit).execute();
    },

    /**
     * Counts the account's destinations of one purpose under a lock held to the end of `tx`, so
     * that additions at once cannot pass a bound together (`tx` must be a transaction).
     */
    async countDestinationsLocked(accountId: string, purpose: string, tx: Executor) {
      await lockNamed(tx, `destinations:${purpose}:${accountId}`);
      return tx
        .selectFrom('webhook_destinations')
        .select((eb) => eb.fn.countAll<string>().as('count'))
        .where('account_id', '=', accountId)
        .where('purpose', '=', purpose)
        .executeTakeFirstOrThrow();
    },

    /** A destination's address and signing secrets (sealed), the previous one only while it still signs. */
    async destinationForSending(accountId: string, purpose: string, id: string, tx: Executor = db) {
      const result = await sql<{ url: string; secret: string; previous_secret: string | null }>`
        SELECT url, secret, CASE WHEN previous_secret_until > now() THEN previous_secret END AS previous_secret
        FROM webhook_destinations
        WHERE account_id = ${accountId}::uuid AND purpose = ${purpose} AND id = ${id}::uuid`.execute(tx);
      return result.rows[0];
    },

    findDestination(accountId: string, purpose: string, id: string, tx: Executor = db) {
      return tx
        .selectFrom('webhook_destinations')
        .select(DESTINATION_COLUMNS)
        .where('account_id', '=', accountId)
        .where('purpose', '=', purpose)
        .where('id', '=', id)
        .executeTakeFirst();
    },

    updateDestination(
      accountId: string,
      purpose: string,
      id: string,
      changes: {
        url?: string;
        events?: string[];
        description?: string | null;
        enabled?: boolean;
        /** A new secret: the current one keeps signing beside it until `previousUntil`. */
        rotate?: { secret: string; previousUntil: Date };
      },
      tx: Executor = db,
    ) {
      const { rotate, ...plain } = changes;
      return tx
        .updateTable('webhook_destinations')
        .set((eb) => ({
          ...plain,
          ...(plain.enabled === true ? { failing_since: null, disabled_reason: null } : {}),
          ...(plain.enabled === false ? { disabled_reason: 'by_user' } : {}),
          ...(rotate
            ? {
                previous_secret: eb.ref('secret'),
                previous_secret_until: rotate.previousUntil,
                secret: rotate.secret,
              }
            : {}),
          updated_at: new Date(),
        }))
        .where('account_id', '=', accountId)
        .where('purpose', '=', purpose)
        .where('id', '=', id)
        .returning(DESTINATION_COLUMNS)
        .executeTakeFirst();
    },

    /**
     * Deletes a destination with its messages (their attempts go by their key's cascade). The
     * messages are deleted here, not by a foreign key: see `deleteMessagesOf`.
     */
    async deleteDestination(accountId: string, purpose: string, id: string, tx: Executor = db) {
      const result = await sql<{ id: string }>`
        WITH gone AS (
          DELETE FROM webhook_destinations
          WHERE account_id = ${accountId}::uuid AND purpose = ${purpose} AND id = ${id}::uuid
          RETURNING account_id, id
        ), messages AS (
          DELETE FROM outbound_messages m USING gone
          WHERE m.account_id = gone.account_id AND m.destination_id = gone.id
        )
        SELECT id FROM gone`.execute(tx);
      return result.rows[0];
    },

    /**
     * Deletes the messages of a destination that was just deleted, with their attempts. Messages
     * have no foreign key to their destination (migration 0020): the key check locked the
     * destination's row in every transaction that wrote a message to it, so concurrent intake
     * queued on one row per subscribed webhook. A message written for a destination deleted
     * meanwhile fails without a request (`destination_missing`) and is pruned with the others.
     */
    async deleteMessagesOf(accountId: string, destinationId: string, tx: Executor = db) {
      await tx
        .deleteFrom('outbound_messages')
        .where('account_id', '=', accountId)
        .where('destination_id', '=', destinationId)
        .execute();
    },

    /** The account's enabled destinations of one purpose with their subscribed events. */
    subscriptions(accountId: string, purpose: string, tx: Executor = db) {
      return tx
        .selectFrom('webhook_destinations')
        .select(['id', 'events'])
        .where('account_id', '=', accountId)
        .where('purpose', '=', purpose)
        .where('enabled', '=', true)
        .modifyEnd(PREPARED)
        .execute();
    },

    /**
     * The attempts of a destination's messages, or of the messages one origin sent (an
     * automation's), newest first, after the cursor position: the attempt rows and the
     * successful attempts kept on their messages (`finishDelivered`), each side read in its own
     * index's order and merged.
     */
    async listAttempts(
      accountId: string,
      of: AttemptsOf,
      limit: number,
      after: { createdAt: string; id: string } | null,
      tx: Executor = db,
    ) {
      const [attemptColumn, messageColumn, ownerId] =
        'destinationId' in of
          ? ['destination_id', 'destination_id', of.destinationId]
          : 'originId' in of
            ? ['origin_id', 'origin_id', of.originId]
            : ['message_id', 'id', of.messageId];
      const attemptOwner = sql.ref(`a.${attemptColumn}`);
      const messageOwner = sql.ref(`m.${messageColumn}`);
      const at = after ? new Date(after.createdAt) : null;
      const attemptsAfter = at ? sql`AND (a.created_at, a.id) < (${at}, ${after!.id}::uuid)` : sql``;
      const keptAfter = at ? sql`AND (m.finished_at, m.id) < (${at}, ${after!.id}::uuid)` : sql``;
      const result = await sql<AttemptRow>`
        SELECT * FROM (
          (SELECT a.id, a.message_id, m.event_type, a.attempt, a.outcome, a.status_code, a.reply, a.error,
            a.duration_ms, a.created_at
          FROM outbound_attempts a
          JOIN outbound_messages m ON m.account_id = a.account_id AND m.id = a.message_id
          WHERE a.account_id = ${accountId}::uuid AND ${attemptOwner} = ${ownerId}::uuid
            ${attemptsAfter}
          ORDER BY a.created_at DESC, a.id DESC
          LIMIT ${limit})
          UNION ALL
          (SELECT m.id, m.id AS message_id, m.event_type, m.attempts AS attempt, 'delivered' AS outcome, m.status_code,
            m.reply, NULL AS error, m.duration_ms, m.finished_at AS created_at
          FROM outbound_messages m
          WHERE m.account_id = ${accountId}::uuid AND ${messageOwner} = ${ownerId}::uuid
            AND m.duration_ms IS NOT NULL
            ${keptAfter}
          ORDER BY m.finished_at DESC, m.id DESC
          LIMIT ${limit})
        ) AS attempts
        ORDER BY created_at DESC, id DESC
        LIMIT ${limit}`.execute(tx);
      return result.rows;
    },

    /** The account's stored secrets of one destination, sealed. */
    destinationSecrets(accountId: string, id: string, tx: Executor = db) {
      return tx
        .selectFrom('webhook_destinations')
        .select(['secret', 'previous_secret', 'previous_secret_until'])
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .executeTakeFirst();
    },
  };
}

export type OutboundRepo = ReturnType<typeof createOutboundRepo>;

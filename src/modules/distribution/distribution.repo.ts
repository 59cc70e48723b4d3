import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { toJson } from '../../db/json.ts';
import type { Executor, ParticipationSchedule, RuleFilter } from '../../db/types.ts';

/** A participation of a rule, locked for the run, with its partner and its webhook destination's state. */
export interface LockedParticipation {
  id: string;
  partner_id: string;
  partner_name: string;
  partner_retired: boolean;
  channel: string;
  address: string;
  destination_id: string | null;
  destination_enabled: boolean | null;
  price_cents: number;
  currency: string;
  cap_per_day: number | null;
  cap_per_month: number | null;
  schedule: ParticipationSchedule | null;
  paused: boolean;
  weight: number;
  current_weight: number;
}

export interface NewDelivery {
  id: string;
  runId: string;
  recordId: string;
  distributionId: string;
  participationId: string;
  partnerId: string;
  ruleName: string;
  channel: string;
  priceCents: number;
  currency: string;
  messageId: string;
}

/** A delivery with its partner, as the views show it. */
const DELIVERY_COLUMNS = sql`d.id, d.run_id, d.record_id, d.participation_id, d.partner_id, p.name AS partner,
  p.email AS partner_email, p.phone AS partner_phone, p.city AS partner_city, d.rule_name, d.channel, d.status,
  d.price_cents, d.currency, d.attempts, d.error, d.created_at, d.delivered_at, d.returned_at`;

export interface DeliveryRow {
  id: string;
  run_id: string;
  record_id: string;
  participation_id: string;
  partner_id: string;
  partner: string;
  partner_email: string;
  partner_phone: string;
  partner_city: string;
  rule_name: string;
  channel: string;
  status: string;
  price_cents: number;
  currency: string;
  attempts: number;
  error: string | null;
  created_at: Date;
  delivered_at: Date | null;
  returned_at: Date | null;
}

export interface DeliveryFilter {
  status?: string;
  partnerId?: string;
  recordId?: string;
  from?: Date;
  /** Exclusive upper bound. */
  before?: Date;
  /** Only rows after this position of the newest-first order (the last row of the page before). */
  after?: { createdAt: string; id: string } | null;
}

/** The SQL of distribution runs, deliveries and returns. */
export function createDistributionRepo(db: Executor) {
  return {
    /** Locks the record's row for the run: runs of one record take turns. */
    lockRecord(accountId: string, recordId: string, tx: Executor) {
      return tx
        .selectFrom('records')
        .select(['id', 'entity_id', 'name', 'fields', 'source', 'created_at'])
        .where('account_id', '=', accountId)
        .where('id', '=', recordId)
        .forUpdate()
        .executeTakeFirst();
    },

    findDistribution(accountId: string, entityId: string, tx: Executor = db) {
      return tx
        .selectFrom('distributions')
        .select(['id', 'enabled', 'return_deadline_days', 'redistribute_on_return'])
        .where('account_id', '=', accountId)
        .where('entity_id', '=', entityId)
        .executeTakeFirst();
    },

    /** Of these ids, those that name partners of the account. */
    async partnersAmong(accountId: string, ids: string[], tx: Executor = db): Promise<string[]> {
      const rows = await tx
        .selectFrom('partners')
        .select('id')
        .where('account_id', '=', accountId)
        .where('id', 'in', ids)
        .execute();
      return rows.map((row) => row.id);
    },

    /**
     * Every delivery the record had, failed ones included, with its partner, its status and, when
     * returned, whether the return was made with redistribution.
     */
    async deliveriesOfRecord(accountId: string, recordId: string, tx: Executor) {
      const result = await sql<{ partner_id: string; status: string; redistributed_return: boolean }>`
        SELECT d.partner_id, d.status, coalesce(r.redistribute, false) AS redistributed_return
        FROM deliveries d
        LEFT JOIN delivery_returns r ON r.account_id = d.account_id AND r.delivery_id = d.id
        WHERE d.account_id = ${accountId}::uuid AND d.record_id = ${recordId}::uuid`.execute(tx);
      return result.rows;
    },

    /**
     * The rules a run tries, in order. A rule naming no participation is passed over: removing a
     * participation took it out of its rules until 2026-11-28, which could leave a rule choosing
     * from nothing that, matching first, kept every record from the rules behind it.
     */
    rules(accountId: string, distributionId: string, tx: Executor) {
      return tx
        .selectFrom('distribution_rules')
        .select(['id', 'name', 'filter', 'strategy', 'max_partners', 'participation_ids'])
        .where('account_id', '=', accountId)
        .where('distribution_id', '=', distributionId)
        .where(sql<number>`cardinality(participation_ids)`, '>', 0)
        .orderBy('position')
        .orderBy('created_at')
        .orderBy('id')
        .execute();
    },

    /** Locks the rule that decides (round-robin cursor, weights) and answers its cursor. */
    async lockRule(accountId: string, ruleId: string, tx: Executor): Promise<number> {
      const row = await tx
        .selectFrom('distribution_rules')
        .select('round_robin_cursor')
        .where('account_id', '=', accountId)
        .where('id', '=', ruleId)
        .forUpdate()
        .executeTakeFirstOrThrow();
      return row.round_robin_cursor;
    },

    setCursor(accountId: string, ruleId: string, cursor: number, tx: Executor) {
      return tx
        .updateTable('distribution_rules')
        .set({ round_robin_cursor: cursor })
        .where('account_id', '=', accountId)
        .where('id', '=', ruleId)
        .execute();
    },

    /**
     * The rule's participations, locked in id order (every run locks in the same order, so two
     * runs never wait on each other in a circle), with their partners and destinations. The
     * partners are share-locked: a retirement waits for the run's commit (and then fails the
     * deliveries it wrote), and a run that waited for a retirement sees the partner retired.
     */
    async lockParticipations(accountId: string, ids: string[], tx: Executor) {
      if (ids.length === 0) return [];
      const result = await sql<LockedParticipation>`
        SELECT pa.id, pa.partner_id, pr.name AS partner_name, pr.retired AS partner_retired, pa.channel, pa.address,
          pa.destination_id, wd.enabled AS destination_enabled, pa.price_cents, pa.currency, pa.cap_per_day,
          pa.cap_per_month, pa.schedule, pa.paused, pa.weight, pa.current_weight
        FROM participations pa
        JOIN partners pr ON pr.account_id = pa.account_id AND pr.id = pa.partner_id
        LEFT JOIN webhook_destinations wd ON wd.account_id = pa.account_id AND wd.id = pa.destination_id
        WHERE pa.account_id = ${accountId}::uuid AND pa.id = any(${ids}::uuid[])
        ORDER BY pa.id
        FOR NO KEY UPDATE OF pa FOR SHARE OF pr`.execute(tx);
      return result.rows;
    },

    /**
     * Counts one delivery in a cap period, only while the count is below the cap (null: no cap):
     * an upsert whose update holds the row lock, so concurrent runs cannot pass the cap. Answers
     * whether it counted.
     */
    async countIn(
      accountId: string,
      participationId: string,
      period: string,
      cap: number | null,
      tx: Executor,
    ): Promise<boolean> {
      const result = await sql<{ count: number }>`
        INSERT INTO participation_counts AS c (account_id, participation_id, period, count)
        VALUES (${accountId}::uuid, ${participationId}::uuid, ${period}, 1)
        ON CONFLICT (account_id, participation_id, period) DO UPDATE SET count = c.count + 1
        WHERE ${cap}::int IS NULL OR c.count < ${cap}::int
        RETURNING c.count`.execute(tx);
      return result.rows.length > 0;
    },

    /** Takes back a count of this transaction (the other period of the same delivery was full). */
    async uncount(accountId: string, participationId: string, period: string, tx: Executor) {
      await sql`UPDATE participation_counts SET count = count - 1
        WHERE account_id = ${accountId}::uuid AND participation_id = ${participationId}::uuid AND period = ${period}`.execute(
        tx,
      );
    },

    async setWeights(accountId: string, weights: { id: string; current: number }[], tx: Executor) {
      if (weights.length === 0) return;
      await sql`UPDATE participations p SET current_weight = w.current
        FROM jsonb_to_recordset(${toJson(weights)}::jsonb) AS w(id uuid, current int)
        WHERE p.account_id = ${accountId}::uuid AND p.id = w.id`.execute(tx);
    },

    insertRun(
      accountId: string,
      run: {
        id: string;
        distributionId: string;
        recordId: string;
        status: string;
        reason: string | null;
        triggeredBy: string;
      },
      tx: Executor,
    ) {
      return tx
        .insertInto('distribution_runs')
        .values({
          account_id: accountId,
          id: run.id,
          distribution_id: run.distributionId,
          record_id: run.recordId,
          status: run.status,
          reason: run.reason,
          triggered_by: run.triggeredBy,
          finished_at: sql<Date>`now()`,
        })
        .returning(['started_at', 'finished_at'])
        .executeTakeFirstOrThrow();
    },

    async insertDeliveries(accountId: string, deliveries: NewDelivery[], tx: Executor) {
      if (deliveries.length === 0) return;
      await tx
        .insertInto('deliveries')
        .values(
          deliveries.map((d) => ({
            account_id: accountId,
            id: d.id,
            run_id: d.runId,
            record_id: d.recordId,
            distribution_id: d.distributionId,
            participation_id: d.participationId,
            partner_id: d.partnerId,
            rule_name: d.ruleName,
            channel: d.channel,
            price_cents: d.priceCents,
            currency: d.currency,
            message_id: d.messageId,
          })),
        )
        .execute();
    },

    findRun(accountId: string, runId: string, tx: Executor = db) {
      return tx
        .selectFrom('distribution_runs')
        .select(['id', 'status', 'reason', 'record_id', 'triggered_by', 'started_at', 'finished_at'])
        .where('account_id', '=', accountId)
        .where('id', '=', runId)
        .executeTakeFirst();
    },

    async deliveriesOfRun(accountId: string, runId: string, tx: Executor = db) {
      const result = await sql<DeliveryRow>`
        SELECT ${DELIVERY_COLUMNS}
        FROM deliveries d JOIN partners p ON p.account_id = d.account_id AND p.id = d.partner_id
        WHERE d.account_id = ${accountId}::uuid AND d.run_id = ${runId}::uuid
        ORDER BY d.created_at, d.id`.execute(tx);
      return result.rows;
    },

    /** The outbound message that carries a delivery (null before one was written), if the delivery is the account's. */
    async deliveryMessage(accountId: string, id: string, tx: Executor = db) {
      return tx
        .selectFrom('deliveries')
        .select('message_id')
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .executeTakeFirst();
    },

    async findDelivery(accountId: string, id: string, tx: Executor = db) {
      const result = await sql<DeliveryRow>`
        SELECT ${DELIVERY_COLUMNS}
        FROM deliveries d JOIN partners p ON p.account_id = d.account_id AND p.id = d.partner_id
        WHERE d.account_id = ${accountId}::uuid AND d.id = ${id}::uuid`.execute(tx);
      return result.rows[0];
    },

    /** Deliveries newest first, filtered as the on-screen list. */
    async listDeliveries(accountId: string, filter: DeliveryFilter, limit: number, tx: Executor = db) {
      const afterAt = filter.after ? new Date(filter.after.createdAt) : null;
      const afterId = filter.after?.id ?? null;
      const result = await sql<DeliveryRow>`
        SELECT ${DELIVERY_COLUMNS}
        FROM deliveries d JOIN partners p ON p.account_id = d.account_id AND p.id = d.partner_id
        WHERE d.account_id = ${accountId}::uuid
          AND (${filter.status ?? null}::text IS NULL OR d.status = ${filter.status ?? null}::text)
          AND (${filter.partnerId ?? null}::uuid IS NULL OR d.partner_id = ${filter.partnerId ?? null}::uuid)
          AND (${filter.recordId ?? null}::uuid IS NULL OR d.record_id = ${filter.recordId ?? null}::uuid)
          AND (${filter.from ?? null}::timestamptz IS NULL OR d.created_at >= ${filter.from ?? null}::timestamptz)
          AND (${filter.before ?? null}::timestamptz IS NULL OR d.created_at < ${filter.before ?? null}::timestamptz)
          AND (${afterAt}::timestamptz IS NULL
            OR (d.created_at, d.id) < (${afterAt}::timestamptz, ${afterId}::uuid))
        ORDER BY d.created_at DESC, d.id DESC
        LIMIT ${limit}`.execute(tx);
      return result.rows;
    },

    /**
     * One attempt's outcome on its delivery, while the delivery is pending: attempts, last error,
     * and its final state. Answers the delivery when it changed.
     */
    async recordAttempt(
      accountId: string,
      deliveryId: string,
      outcome: { status: 'pending' | 'delivered' | 'failed'; attempts: number; error: string | null },
      tx: Executor,
    ) {
      return tx
        .updateTable('deliveries')
        .set({
          attempts: outcome.attempts,
          error: outcome.status === 'delivered' ? null : outcome.error,
          status: outcome.status,
          delivered_at: outcome.status === 'delivered' ? sql<Date>`now()` : null,
        })
        .where('account_id', '=', accountId)
        .where('id', '=', deliveryId)
        .where('status', '=', 'pending')
        .returning(['id', 'participation_id', 'record_id'])
        .executeTakeFirst();
    },

    pauseParticipation(accountId: string, participationId: string, reason: string, tx: Executor) {
      return tx
        .updateTable('participations')
        .set({ paused: true, paused_reason: reason, updated_at: sql<Date>`now()` })
        .where('account_id', '=', accountId)
        .where('id', '=', participationId)
        .execute();
    },

    /** Locks a delivery for its return, with the deadline settings of its distribution. */
    async lockDeliveryForReturn(accountId: string, id: string, tx: Executor) {
      const result = await sql<{
        id: string;
        record_id: string;
        status: string;
        delivered_at: Date | null;
        return_deadline_days: number | null;
        redistribute_on_return: boolean | null;
      }>`
        SELECT d.id, d.record_id, d.status, d.delivered_at, di.return_deadline_days, di.redistribute_on_return
        FROM deliveries d
        LEFT JOIN distributions di ON di.account_id = d.account_id AND di.id = d.distribution_id
        WHERE d.account_id = ${accountId}::uuid AND d.id = ${id}::uuid
        FOR UPDATE OF d`.execute(tx);
      return result.rows[0];
    },

    async markReturned(
      accountId: string,
      id: string,
      input: {
        reasonId: string | null;
        text: string | null;
        reportedBy: string | null;
        redistribute: boolean;
      },
      tx: Executor,
    ) {
      await tx
        .updateTable('deliveries')
        .set({ status: 'returned', returned_at: sql<Date>`now()` })
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .execute();
      await tx
        .insertInto('delivery_returns')
        .values({
          account_id: accountId,
          id: randomUUID(),
          delivery_id: id,
          reason_id: input.reasonId,
          text: input.text,
          reported_by: input.reportedBy,
          redistribute: input.redistribute,
        })
        .execute();
    },

    /**
     * Adds a redistribution's outcome to the `delivery_returned` history event of the return
     * written earlier in the same transaction (so that the history tells the return and what
     * followed it in one entry, before the new run's `distributed`).
     */
    async noteRedistribution(
      accountId: string,
      recordId: string,
      deliveryId: string,
      note: { message: string; data: Record<string, unknown> },
      tx: Executor,
    ) {
      await sql`UPDATE record_events SET message = message || ${note.message},
          data = data || ${toJson(note.data)}::jsonb
        WHERE account_id = ${accountId}::uuid AND record_id = ${recordId}::uuid
          AND type = 'delivery_returned' AND data->>'delivery_id' = ${deliveryId}`.execute(tx);
    },

    /**
     * Fails the partner's pending deliveries (its retirement), and answers them with the ids of
     * their messages. Runs after the messages were stopped: the engine writes a message, then
     * its delivery, and so does this, so neither waits on the other in a circle.
     */
    async failPendingOfPartner(accountId: string, partnerId: string, error: string, tx: Executor) {
      return tx
        .updateTable('deliveries')
        .set({ status: 'failed', error })
        .where('account_id', '=', accountId)
        .where('partner_id', '=', partnerId)
        .where('status', '=', 'pending')
        .returning(['id'])
        .execute();
    },

    /** The messages of the partner's pending deliveries. */
    async pendingMessagesOfPartner(accountId: string, partnerId: string, tx: Executor) {
      const rows = await tx
        .selectFrom('deliveries')
        .select('message_id')
        .where('account_id', '=', accountId)
        .where('partner_id', '=', partnerId)
        .where('status', '=', 'pending')
        .execute();
      return rows.flatMap((row) => (row.message_id ? [row.message_id] : []));
    },

    findReturnReason(accountId: string, id: string, tx: Executor = db) {
      return tx
        .selectFrom('return_reasons')
        .select(['id', 'name'])
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .executeTakeFirst();
    },

    /** A participation with its distribution's entity, for a test delivery. */
    findParticipation(accountId: string, id: string, tx: Executor = db) {
      return tx
        .selectFrom('participations')
        .innerJoin('distributions', (join) =>
          join
            .onRef('distributions.account_id', '=', 'participations.account_id')
            .onRef('distributions.id', '=', 'participations.distribution_id'),
        )
        .select([
          'participations.id',
          'participations.channel',
          'participations.address',
          'participations.destination_id',
          'participations.price_cents',
          'participations.currency',
          'distributions.entity_id',
        ])
        .where('participations.account_id', '=', accountId)
        .where('participations.id', '=', id)
        .executeTakeFirst();
    },
  };
}

export type DistributionRepo = ReturnType<typeof createDistributionRepo>;
export type { RuleFilter };

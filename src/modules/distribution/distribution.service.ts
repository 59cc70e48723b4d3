import { randomUUID } from 'node:crypto';
import type { Db, Executor } from '../../db/types.ts';
import { AppError } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import { timeOrderedId } from '../../lib/ids.ts';
import type { MessageOutcome, OutboundService } from '../../outbound/outbound.service.ts';
import type { EntitiesService } from '../entities/entities.service.ts';
import type { RecordsRepo } from '../records/records.repo.ts';
import {
  DELIVERY_WEBHOOK_TYPE,
  type DeliveredRecord,
  deliveryEmail,
  deliveryWebhookData,
  inventedRecord,
} from './distribution.messages.ts';
import type { DeliveryRow, DistributionRepo, LockedParticipation } from './distribution.repo.ts';
import {
  type Candidate,
  capPeriods,
  filterMatches,
  inSchedule,
  type Strategy,
  strategyOrder,
} from './distribution.selection.ts';

/** The outbound engine's purpose of participation webhooks, and the hook that follows deliveries. */
export const PARTICIPATION_WEBHOOK = 'participation';
const DELIVERY_HOOK = 'distribution.delivery';
/** How long a start waits for its deliveries' first attempts (decisions §8). */
const FIRST_ATTEMPT_WAIT_MS = 10_000;
const POLL_MS = 50;
/** The error of a delivery that was pending when its partner was retired. */
export const PARTNER_RETIRED = 'partner_retired';
/** Why a participation was paused by the service: its receiver answered 410 Gone. */
export const PAUSED_GONE = 'gone';

export type TriggeredBy = 'api' | 'intake' | 'automation' | 'return';

export interface DistributeOptions {
  triggeredBy: TriggeredBy;
  /** Only these partners may be chosen (the intake node's `partner_ids`). */
  partnerIds?: string[];
  /** Never these partners (redistribution: those that had the record). */
  excludePartnerIds?: string[];
  /** At most this many partners, below the rule's `max_partners` (redistribution replaces one). */
  maxPartners?: number;
  /** Who started it, as the history shows (`api:<key>`, `automation:<name>`, …). */
  actor?: string;
}

export interface RunOutcome {
  runId: string;
  recordId: string;
  status: 'decided' | 'no_match';
  reason: string | null;
  /** The deliveries in the order they were chosen. */
  deliveryIds: string[];
  /** The messages that carry the deliveries, to be sent after the commit. */
  messageIds: string[];
  /** Of `partnerIds`, those that name no partner of the account. */
  unknownPartnerIds: string[];
}

export interface DistributionServiceDeps {
  db: Db;
  repo: DistributionRepo;
  entities: EntitiesService;
  records: Pick<RecordsRepo, 'insertEvents'>;
  outbound: OutboundService;
  /** The clock of schedules and cap periods. */
  now?: () => Date;
  /** How long a start waits for first attempts (10 s). */
  firstAttemptWaitMs?: number;
}

/** A delivery as the start answer lists it (interface: POST …/distributions). */
function partnerItem(row: DeliveryRow) {
  return {
    name: row.partner,
    email: row.partner_email,
    phone: row.partner_phone,
    city: row.partner_city,
    price_cents: row.price_cents,
    channel: row.channel,
    status: row.status,
  };
}

/** A delivery in the run view (interface: without rule, error, created_at, record_id). */
export function runDeliveryView(row: DeliveryRow) {
  return {
    id: row.id,
    status: row.status,
    partner: row.partner,
    partner_id: row.partner_id,
    channel: row.channel,
    price_cents: row.price_cents,
    currency: row.currency,
    attempts: row.attempts,
    delivered_at: row.delivered_at ? iso(row.delivered_at) : null,
  };
}

/** A delivery in the list, and in `delivery.*` events. */
export function deliveryView(row: DeliveryRow) {
  return {
    ...runDeliveryView(row),
    rule: row.rule_name,
    error: row.error,
    created_at: iso(row.created_at),
    returned_at: row.returned_at ? iso(row.returned_at) : null,
    record_id: row.record_id,
    run_id: row.run_id,
  };
}

function noDistribution(): AppError {
  return new AppError('no_distribution', { message: 'No distribution is set up for this kind of record' });
}

/**
 * Distribution runs (decisions §8): the one entry point `distribute` that every trigger uses,
 * the wait for first attempts after the commit, the delivery's state per attempt (outbound
 * hook), the run view and test deliveries.
 */
export function createDistributionService(deps: DistributionServiceDeps) {
  const { db, repo, entities, records, outbound } = deps;
  const now = deps.now ?? (() => new Date());
  const waitMs = deps.firstAttemptWaitMs ?? FIRST_ATTEMPT_WAIT_MS;

  /** Whether a participation can take this record now, apart from its caps. */
  function active(p: LockedParticipation, at: Date, options: DistributeOptions): boolean {
    if (p.partner_retired || p.paused) return false;
    if (p.channel === 'webhook' && (!p.destination_id || p.destination_enabled === false)) return false;
    if (options.partnerIds && !options.partnerIds.includes(p.partner_id)) return false;
    if (options.excludePartnerIds?.includes(p.partner_id)) return false;
    return inSchedule(p.schedule, at);
  }

  /** Counts one delivery in the participation's day and month, unless one of them is at its cap. */
  async function takeCap(accountId: string, p: LockedParticipation, at: Date, tx: Executor) {
    if ((p.cap_per_day !== null && p.cap_per_day < 1) || (p.cap_per_month !== null && p.cap_per_month < 1))
      return false;
    const periods = capPeriods(p.schedule, at);
    if (!(await repo.countIn(accountId, p.id, periods.day, p.cap_per_day, tx))) return false;
    if (await repo.countIn(accountId, p.id, periods.month, p.cap_per_month, tx)) return true;
    await repo.uncount(accountId, p.id, periods.day, tx);
    return false;
  }

  /** Writes a delivery's outbound message (webhook or email) in the run's transaction. */
  async function enqueueDelivery(
    tx: Executor,
    accountId: string,
    deliveryId: string,
    p: LockedParticipation,
    record: DeliveredRecord,
    entity: NonNullable<Awaited<ReturnType<EntitiesService['find']>>>,
  ): Promise<string> {
    if (p.channel === 'email') {
      return outbound.enqueueEmail(tx, accountId, deliveryEmail(p.address, deliveryId, entity, record), {
        type: 'delivery.email',
        notify: DELIVERY_HOOK,
        ref: deliveryId,
      });
    }
    return outbound.enqueueWebhook(tx, accountId, {
      destinationId: p.destination_id!,
      type: DELIVERY_WEBHOOK_TYPE,
      data: deliveryWebhookData(deliveryId, record, { priceCents: p.price_cents, currency: p.currency }),
      notify: DELIVERY_HOOK,
      ref: deliveryId,
    });
  }

  async function runWithin(
    tx: Executor,
    accountId: string,
    recordId: string,
    options: DistributeOptions,
  ): Promise<RunOutcome> {
    const record = await repo.lockRecord(accountId, recordId, tx);
    if (!record) throw new AppError('record_not_found', { message: 'No record matches' });
    const entity = await entities.find(accountId, record.entity_id, tx);
    const distribution = entity ? await repo.findDistribution(accountId, entity.id, tx) : undefined;
    if (!entity || !distribution?.enabled) throw noDistribution();
    const at = now();
    const runId = timeOrderedId();
    let unknownPartnerIds: string[] = [];
    const finish = async (status: RunOutcome['status'], reason: string | null, messageIds: string[] = []) => {
      await repo.insertRun(
        accountId,
        {
          id: runId,
          distributionId: distribution.id,
          recordId,
          status,
          reason,
          triggeredBy: options.triggeredBy,
        },
        tx,
      );
      return { runId, recordId, status, reason, deliveryIds: [] as string[], messageIds, unknownPartnerIds };
    };

    if (options.partnerIds && options.partnerIds.length > 0) {
      const known = await repo.partnersAmong(accountId, options.partnerIds, tx);
      unknownPartnerIds = options.partnerIds.filter((id) => !known.includes(id));
    }

    // A record goes out once (decisions §8: "at most once unless returned with redistribution"):
    // a delivery that is pending or delivered, or returned without redistribution, makes it
    // distributed, and only a return's redistribution runs again. A failed delivery reached no
    // one, and nor did a return with redistribution that found no partner (or whose new
    // delivery failed), so such a record may run again; either way never to a partner that had
    // a delivery of it, failed and returned ones included ("never to the same partner").
    const earlier = await repo.deliveriesOfRecord(accountId, recordId, tx);
    const distributed = earlier.some(
      (d) =>
        d.status === 'pending' ||
        d.status === 'delivered' ||
        (d.status === 'returned' && !d.redistributed_return),
    );
    if (options.triggeredBy !== 'return' && distributed) return finish('no_match', 'already_distributed');
    const excluded = [
      ...new Set([...(options.excludePartnerIds ?? []), ...earlier.map((d) => d.partner_id)]),
    ];
    const effective: DistributeOptions = { ...options, excludePartnerIds: excluded };

    const fields = record.fields as Record<string, unknown>;
    const rule = (await repo.rules(accountId, distribution.id, tx)).find((r) =>
      filterMatches(r.filter, fields),
    );
    if (!rule) return finish('no_match', 'no_rule_matched');

    const cursor = await repo.lockRule(accountId, rule.id, tx);
    const locked = await repo.lockParticipations(accountId, rule.participation_ids, tx);
    const byId = new Map(locked.map((p) => [p.id, p]));
    const candidates: Candidate[] = [];
    rule.participation_ids.forEach((id, position) => {
      const p = byId.get(id);
      if (p && active(p, at, effective) && !candidates.some((c) => c.id === id)) {
        candidates.push({
          id,
          position,
          priceCents: p.price_cents,
          weight: p.weight,
          currentWeight: p.current_weight,
        });
      }
    });
    if (candidates.length === 0) return finish('no_match', 'no_active_participation');

    const strategy = rule.strategy as Strategy;
    const ordered = strategyOrder(strategy, candidates, cursor, rule.participation_ids.length);
    const limit = Math.max(1, Math.min(rule.max_partners, options.maxPartners ?? rule.max_partners));
    const chosen: Candidate[] = [];
    const capped = new Set<string>();
    const chosenPartners = new Set<string>();
    let currency: string | undefined;
    for (const candidate of ordered) {
      if (chosen.length >= limit) break;
      const p = byId.get(candidate.id)!;
      // One participation per partner in a run: the first of the partner's in the strategy's
      // order that has a free cap; the others are passed over (neither chosen nor counted). One
      // currency per run, the first chosen's, so that `price_total` adds like with like (a
      // distribution's participations share one since writes refuse another; older rows may not).
      if (chosenPartners.has(p.partner_id) || (currency !== undefined && p.currency !== currency)) continue;
      if (await takeCap(accountId, p, at, tx)) {
        chosen.push(candidate);
        chosenPartners.add(p.partner_id);
        currency ??= p.currency;
      } else capped.add(candidate.id);
    }

    if (strategy === 'weighted') {
      // Smooth weighted round robin: all eligible gained their weight, the chosen give the total
      // back; one at its cap gains nothing, so that it does not take a run of records once free.
      const total = candidates.reduce((sum, c) => sum + c.weight, 0);
      const current = (c: Candidate) => {
        if (chosen.some((x) => x.id === c.id)) return c.currentWeight - total;
        return capped.has(c.id) ? c.currentWeight - c.weight : c.currentWeight;
      };
      await repo.setWeights(
        accountId,
        ordered.map((c) => ({ id: c.id, current: current(c) })),
        tx,
      );
    } else if (strategy !== 'all' && chosen.length > 0) {
      // The next run starts after the last one chosen (round robin, and ties of cheapest/priciest).
      const last = chosen[chosen.length - 1]!;
      await repo.setCursor(accountId, rule.id, (last.position + 1) % rule.participation_ids.length, tx);
    }
    if (chosen.length === 0) return finish('no_match', 'caps_reached');

    const delivered: DeliveredRecord = {
      id: record.id,
      entity: entity.key,
      name: record.name,
      fields,
      source: record.source,
      created_at: record.created_at,
    };
    const outcome = await finish('decided', null);
    const deliveries = [];
    for (const candidate of chosen) {
      const p = byId.get(candidate.id)!;
      const id = timeOrderedId();
      const messageId = await enqueueDelivery(tx, accountId, id, p, delivered, entity);
      outcome.messageIds.push(messageId);
      outcome.deliveryIds.push(id);
      deliveries.push({
        id,
        runId,
        recordId,
        distributionId: distribution.id,
        participationId: p.id,
        partnerId: p.partner_id,
        ruleName: rule.name,
        channel: p.channel,
        priceCents: p.price_cents,
        currency: p.currency,
        messageId,
      });
    }
    await repo.insertDeliveries(accountId, deliveries, tx);
    const names = chosen.map((c) => byId.get(c.id)!.partner_name);
    await records.insertEvents(
      accountId,
      [
        {
          recordId,
          type: 'distributed',
          message: `Distributed to ${names.join(', ')}`,
          actor: options.actor ?? 'system',
          data: {
            run_id: runId,
            triggered_by: options.triggeredBy,
            rule: rule.name,
            partners: names,
            delivery_ids: deliveries.map((d) => d.id),
          },
        },
      ],
      tx,
    );
    return outcome;
  }

  /**
   * The one entry point of every distribution (start endpoint, intake node, automation,
   * redistribution): in the caller's transaction or its own, it locks the record, lets the
   * first matching rule choose, and writes the run, the deliveries, their messages and the
   * history. Nothing is sent before the commit.
   */
  async function distribute(
    accountId: string,
    recordId: string,
    options: DistributeOptions,
    tx?: Executor,
  ): Promise<RunOutcome> {
    if (tx) return runWithin(tx, accountId, recordId, options);
    return db.transaction().execute((own) => runWithin(own, accountId, recordId, options));
  }

  async function firstAttemptsDone(accountId: string, runId: string) {
    const rows = await repo.deliveriesOfRun(accountId, runId);
    return rows.every((row) => row.status !== 'pending' || row.attempts > 0);
  }

  /**
   * After the commit: sends the run's messages from here (a message the dispatcher took already
   * is followed through its delivery rows) and waits up to the wait time for the first attempts,
   * never for retries.
   */
  async function awaitFirstAttempts(accountId: string, outcome: RunOutcome) {
    if (outcome.messageIds.length === 0) return;
    const deadline = Date.now() + waitMs;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), waitMs);
    });
    const sends = Promise.all(
      outcome.messageIds.map((id) => outbound.sendNow(accountId, id).catch(() => null)),
    );
    const results = await Promise.race([sends, timeout]);
    clearTimeout(timer);
    if (results?.every((result) => result !== null)) return;
    while (Date.now() < deadline && !(await firstAttemptsDone(accountId, outcome.runId))) {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }

  /** The start answer (interface: POST …/distributions) with each delivery's state now. */
  async function startAnswer(accountId: string, outcome: RunOutcome, tx: Executor = db) {
    const order = (id: string) => outcome.deliveryIds.indexOf(id);
    const rows = (await repo.deliveriesOfRun(accountId, outcome.runId, tx)).sort(
      (a, b) => order(a.id) - order(b.id),
    );
    return {
      status: rows.length > 0 ? 'distributed' : outcome.status,
      reason: rows.length > 0 ? null : outcome.reason,
      partner_count: rows.length,
      partner_names: rows.map((row) => row.partner).join(', '),
      partner: rows.map(partnerItem),
      price_total: rows.reduce((sum, row) => sum + row.price_cents, 0),
      run_id: outcome.runId,
    };
  }

  /** One attempt of a delivery's message: its state, the partner paused on 410, and the account's events. */
  async function onOutcome(tx: Executor, outcome: MessageOutcome) {
    if (!outcome.ref) return;
    const changed = await repo.recordAttempt(
      outcome.accountId,
      outcome.ref,
      { status: outcome.status, attempts: outcome.attempts, error: outcome.error },
      tx,
    );
    if (!changed) return;
    if (outcome.gone)
      await repo.pauseParticipation(outcome.accountId, changed.participation_id, PAUSED_GONE, tx);
    if (outcome.status === 'pending') return;
    const row = await repo.findDelivery(outcome.accountId, outcome.ref, tx);
    if (!row) return;
    await outbound.emitEvent(
      tx,
      outcome.accountId,
      outcome.status === 'delivered' ? 'delivery.delivered' : 'delivery.failed',
      { delivery: deliveryView(row) },
    );
  }
  outbound.onOutcome(DELIVERY_HOOK, onOutcome);

  return {
    distribute,
    awaitFirstAttempts,
    startAnswer,

    /**
     * A partner's retirement, in its transaction: its pending deliveries (first attempt due or a
     * retry waiting) end `failed` with the error `partner_retired`, and their messages are not
     * sent again; each gets its `delivery.failed` account event. A delivery whose attempt is in
     * flight at that moment may still arrive; it is failed all the same.
     */
    async stopPartnerDeliveries(accountId: string, partnerId: string, tx: Executor) {
      const messageIds = await repo.pendingMessagesOfPartner(accountId, partnerId, tx);
      await outbound.repo.failPendingMessages(accountId, messageIds, PARTNER_RETIRED, tx);
      const failed = await repo.failPendingOfPartner(accountId, partnerId, PARTNER_RETIRED, tx);
      for (const { id } of failed) {
        const row = await repo.findDelivery(accountId, id, tx);
        if (row) await outbound.emitEvent(tx, accountId, 'delivery.failed', { delivery: deliveryView(row) });
      }
      return failed.length;
    },

    /** POST /api/v1/distribution/distributions: a run, its commit, then the first attempts. */
    async start(accountId: string, recordId: string, actor: string) {
      const outcome = await distribute(accountId, recordId, { triggeredBy: 'api', actor });
      await awaitFirstAttempts(accountId, outcome);
      return startAnswer(accountId, outcome);
    },

    async run(accountId: string, runId: string) {
      const run = await repo.findRun(accountId, runId);
      if (!run) throw new AppError('not_found', { message: 'Distribution run not found' });
      const rows = await repo.deliveriesOfRun(accountId, runId);
      return {
        id: run.id,
        status: run.status,
        reason: run.reason,
        record_id: run.record_id,
        triggered_by: run.triggered_by,
        started_at: iso(run.started_at),
        finished_at: run.finished_at ? iso(run.finished_at) : null,
        deliveries: rows.map(runDeliveryView),
      };
    },

    /**
     * Sends an invented record of the distribution's entity to the participation's address over
     * its channel, now and once: no delivery, no count, no message row (decisions §8).
     */
    async test(accountId: string, participationId: string) {
      const p = await repo.findParticipation(accountId, participationId);
      if (!p) throw new AppError('not_found', { message: 'Participation not found' });
      const entity = await entities.find(accountId, p.entity_id);
      if (!entity) throw new AppError('not_found', { message: 'Participation not found' });
      const record = inventedRecord(entity, randomUUID());
      const deliveryId = randomUUID();
      const channel = p.channel === 'email' ? 'email' : 'webhook';
      const sent =
        channel === 'email'
          ? await outbound.sendUnrecorded(accountId, {
              channel: 'email',
              content: deliveryEmail(p.address, deliveryId, entity, record),
            })
          : p.destination_id
            ? await outbound.sendUnrecorded(accountId, {
                channel: 'webhook',
                purpose: PARTICIPATION_WEBHOOK,
                destinationId: p.destination_id,
                type: DELIVERY_WEBHOOK_TYPE,
                data: {
                  ...deliveryWebhookData(deliveryId, record, {
                    priceCents: p.price_cents,
                    currency: p.currency,
                  }),
                  test: true,
                },
              })
            : null;
      if (!sent) {
        return {
          ok: false,
          channel,
          message: 'The participation has no webhook destination',
          status: 0,
          response: '',
          request: { url: p.address, body: '' },
        };
      }
      const { result, request } = sent;
      return {
        ok: result.ok,
        channel,
        message: result.ok
          ? `Test delivery accepted by ${channel === 'email' ? 'the mail server' : 'the receiver'}`
          : `Test delivery failed: ${result.error ?? 'unknown error'}`,
        status: result.statusCode ?? 0,
        response: result.reply ?? '',
        request,
      };
    },
  };
}

export type DistributionService = ReturnType<typeof createDistributionService>;

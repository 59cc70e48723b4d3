import type { Db } from '../../db/types.ts';
import { AppError } from '../../http/errors.ts';
import { decodeCursor, pageOf, refuseUnstorableTimes, timeBound } from '../../lib/cursor.ts';
import type { OutboundService } from '../../outbound/outbound.service.ts';
import type { RecordsRepo } from '../records/records.repo.ts';
import type { DistributionRepo } from './distribution.repo.ts';
import { type DistributionService, deliveryView } from './distribution.service.ts';

/** The list's limit (interface: Limits). */
export const DELIVERIES_DEFAULT_LIMIT = 200;
export const DELIVERIES_MAX_LIMIT = 500;
const DAY_MS = 86_400_000;

export type ReturnRefusal = 'deadline_passed' | 'not_delivered' | 'already_returned';

export interface DeliveriesServiceDeps {
  db: Db;
  repo: DistributionRepo;
  distribution: DistributionService;
  records: Pick<RecordsRepo, 'insertEvents'>;
  outbound: Pick<OutboundService, 'emitEvent' | 'attemptsPage'>;
  now?: () => Date;
}

/** Why a return's redistribution reached no partner, as the history's message says it. */
const NOT_REDISTRIBUTED: Record<string, string> = {
  no_rule_matched: 'no rule matched the record',
  no_active_participation: 'no other partner could take it now',
  caps_reached: 'the other partners are at their caps',
  no_distribution: 'the distribution is switched off',
};

function refused(reason: ReturnRefusal): AppError {
  return new AppError('return_not_allowed', {
    message: {
      deadline_passed: 'The return deadline has passed',
      not_delivered: 'The delivery never arrived',
      already_returned: 'The delivery was returned already',
    }[reason],
    extra: { reason, returned: false, redistributed: false },
  });
}

/** The delivery list and returns (interface: GET …/deliveries, POST …/deliveries/{id}/return). */
export function createDeliveriesService(deps: DeliveriesServiceDeps) {
  const { db, repo, distribution, records, outbound } = deps;
  const now = deps.now ?? (() => new Date());

  return {
    /** A delivery's attempts, newest first, as a webhook's are listed (§12 keeps each). */
    async attempts(accountId: string, deliveryId: string, limit: number, cursor: string | undefined) {
      const delivery = await repo.deliveryMessage(accountId, deliveryId);
      if (!delivery) throw new AppError('not_found', { message: 'Delivery not found' });
      if (!delivery.message_id) return { attempts: [], next_cursor: null };
      return outbound.attemptsPage(accountId, { messageId: delivery.message_id }, limit, cursor);
    },

    async list(
      accountId: string,
      query: {
        status?: string;
        partner_id?: string;
        record_id?: string;
        from?: string;
        to?: string;
        limit?: number;
        cursor?: string;
      },
    ) {
      const limit = query.limit ?? DELIVERIES_DEFAULT_LIMIT;
      const from = timeBound(query.from, false);
      const before = timeBound(query.to, true);
      refuseUnstorableTimes({ from, to: before });
      const rows = await repo.listDeliveries(
        accountId,
        {
          status: query.status,
          partnerId: query.partner_id,
          recordId: query.record_id,
          from,
          before,
          after: decodeCursor(query.cursor),
        },
        limit + 1,
      );
      const page = pageOf(rows, limit);
      return { deliveries: page.items.map(deliveryView), next_cursor: page.nextCursor };
    },

    /**
     * Returns a delivered delivery within its distribution's deadline; with
     * `redistribute_on_return` the record goes to one other partner in the same transaction.
     */
    async giveBack(
      accountId: string,
      deliveryId: string,
      input: { reason_id?: string; text?: string; reported_by?: string },
      actor: string,
    ) {
      const result = await db.transaction().execute(async (tx) => {
        const delivery = await repo.lockDeliveryForReturn(accountId, deliveryId, tx);
        if (!delivery) throw new AppError('not_found', { message: 'Delivery not found' });
        if (input.reason_id && !(await repo.findReturnReason(accountId, input.reason_id, tx))) {
          throw new AppError('validation_failed', {
            details: [
              { key: 'reason_id', reason: 'not_found', message: 'not a return reason of this account' },
            ],
          });
        }
        if (delivery.status === 'returned') throw refused('already_returned');
        if (delivery.status !== 'delivered' || !delivery.delivered_at) throw refused('not_delivered');
        const days = delivery.return_deadline_days ?? 0;
        if (days <= 0 || now().getTime() > delivery.delivered_at.getTime() + days * DAY_MS) {
          throw refused('deadline_passed');
        }
        const reason = input.reason_id
          ? await repo.findReturnReason(accountId, input.reason_id, tx)
          : undefined;
        await repo.markReturned(
          accountId,
          deliveryId,
          {
            reasonId: input.reason_id ?? null,
            text: input.text ?? null,
            reportedBy: input.reported_by ?? null,
            redistribute: delivery.redistribute_on_return === true,
          },
          tx,
        );
        const row = (await repo.findDelivery(accountId, deliveryId, tx))!;
        await records.insertEvents(
          accountId,
          [
            {
              recordId: delivery.record_id,
              type: 'delivery_returned',
              message: `Returned by ${row.partner}${reason ? ` (${reason.name})` : ''}`,
              actor,
              data: {
                delivery_id: deliveryId,
                partner: row.partner,
                reason_id: reason?.id ?? null,
                reason: reason?.name ?? null,
                text: input.text ?? null,
                reported_by: input.reported_by ?? null,
              },
            },
          ],
          tx,
        );
        await outbound.emitEvent(tx, accountId, 'delivery.returned', {
          delivery: deliveryView(row),
          return: { reason_id: reason?.id ?? null, reason: reason?.name ?? null, text: input.text ?? null },
        });
        if (!delivery.redistribute_on_return) return { returned: true, redistributed: false };
        const run = await distribution
          .distribute(accountId, delivery.record_id, { triggeredBy: 'return', maxPartners: 1, actor }, tx)
          .catch((error: unknown) => {
            // A distribution switched off since: the return stands, nothing goes out again.
            if (error instanceof AppError && error.code === 'no_distribution') return null;
            throw error;
          });
        const redistributed = run?.status === 'decided';
        // The history says what the redistribution did; one that reached no partner leaves the
        // record open to a later start (docs/decisions.md, Distribution runs).
        const why = run ? run.reason : 'no_distribution';
        await repo.noteRedistribution(
          accountId,
          delivery.record_id,
          deliveryId,
          {
            message: redistributed ? '' : `; not redistributed: ${NOT_REDISTRIBUTED[why ?? ''] ?? why}`,
            data: {
              redistribution: {
                status: redistributed ? 'distributed' : run ? run.status : 'no_distribution',
                reason: redistributed ? null : why,
                run_id: run?.runId ?? null,
              },
            },
          },
          tx,
        );
        return { returned: true, redistributed };
      });
      return result;
    },
  };
}

export type DeliveriesService = ReturnType<typeof createDeliveriesService>;

import { type Selectable, sql } from 'kysely';
import { toJson } from '../../db/json.ts';
import { pastCursor } from '../../db/keyset.ts';
import { lockNamed } from '../../db/transaction.ts';
import type {
  DistributionRulesTable,
  DistributionsTable,
  Executor,
  ParticipationSchedule,
  ParticipationsTable,
  RuleFilter,
} from '../../db/types.ts';
import type { CursorPosition } from '../../lib/cursor.ts';

export type DistributionRow = Selectable<DistributionsTable> & { entity: string };
/** A participation with what its read shows of its partner and its destination. */
export type ParticipationRow = Selectable<ParticipationsTable> & {
  entity: string;
  partner_name: string;
  partner_retired: boolean;
  previous_secret_until: Date | null;
};
export type RuleRow = Selectable<DistributionRulesTable>;

export interface ParticipationColumns {
  partner_id?: string;
  channel?: string;
  address?: string;
  destination_id?: string | null;
  price_cents?: number;
  currency?: string;
  cap_per_day?: number | null;
  cap_per_month?: number | null;
  schedule?: ParticipationSchedule | null;
  weight?: number;
  paused?: boolean;
  paused_reason?: string | null;
}

export interface RuleColumns {
  name: string;
  filter: RuleFilter[];
  strategy: string;
  max_partners: number;
  participation_ids: string[];
}

function jsonColumns<T extends { schedule?: ParticipationSchedule | null }>(columns: T) {
  const { schedule, ...rest } = columns;
  return schedule === undefined ? rest : { ...rest, schedule: schedule === null ? null : toJson(schedule) };
}

function selectDistributions(tx: Executor, accountId: string) {
  return tx
    .selectFrom('distributions as d')
    .innerJoin('entities as e', (join) =>
      join.onRef('e.account_id', '=', 'd.account_id').onRef('e.id', '=', 'd.entity_id'),
    )
    .selectAll('d')
    .select('e.key as entity')
    .where('d.account_id', '=', accountId);
}

function selectParticipations(tx: Executor, accountId: string) {
  return tx
    .selectFrom('participations as p')
    .innerJoin('distributions as d', (join) =>
      join.onRef('d.account_id', '=', 'p.account_id').onRef('d.id', '=', 'p.distribution_id'),
    )
    .innerJoin('entities as e', (join) =>
      join.onRef('e.account_id', '=', 'd.account_id').onRef('e.id', '=', 'd.entity_id'),
    )
    .innerJoin('partners as pa', (join) =>
      join.onRef('pa.account_id', '=', 'p.account_id').onRef('pa.id', '=', 'p.partner_id'),
    )
    .leftJoin('webhook_destinations as w', (join) =>
      join.onRef('w.account_id', '=', 'p.account_id').onRef('w.id', '=', 'p.destination_id'),
    )
    .selectAll('p')
    .select([
      'e.key as entity',
      'pa.name as partner_name',
      'pa.retired as partner_retired',
      // The previous secret signs only until then; past it, nothing is overlapping.
      sql<Date | null>`CASE WHEN w.previous_secret_until > now() THEN w.previous_secret_until END`.as(
        'previous_secret_until',
      ),
    ])
    .where('p.account_id', '=', accountId);
}

/** Distribution setups (decisions §8): distributions, participations, rules, return reasons. */
export function createSetupRepo(db: Executor) {
  return {
    findDistribution(
      accountId: string,
      entityId: string,
      tx: Executor = db,
    ): Promise<DistributionRow | undefined> {
      return selectDistributions(tx, accountId).where('d.entity_id', '=', entityId).executeTakeFirst();
    },

    /** A page of the account's distributions, oldest first, after the cursor's position (decisions §6). */
    listDistributions(
      accountId: string,
      page: { limit: number; after: CursorPosition | null },
      tx: Executor = db,
    ): Promise<DistributionRow[]> {
      let query = selectDistributions(tx, accountId);
      const { after } = page;
      if (after) {
        query = query.where(pastCursor('d.created_at', 'd.id', 'after', after.createdAt, after.id));
      }
      return query.orderBy('d.created_at').orderBy('d.id').limit(page.limit).execute();
    },

    /** Creates the entity's distribution or changes it (one per entity, decided by the unique index). */
    async saveDistribution(
      accountId: string,
      input: {
        id: string;
        entityId: string;
        name: string;
        changes: { return_deadline_days?: number; redistribute_on_return?: boolean; enabled?: boolean };
      },
      tx: Executor = db,
    ) {
      const { changes } = input;
      await tx
        .insertInto('distributions')
        .values({
          account_id: accountId,
          id: input.id,
          entity_id: input.entityId,
          name: input.name,
          ...changes,
        })
        .onConflict((conflict) =>
          conflict.columns(['account_id', 'entity_id']).doUpdateSet({ ...changes, updated_at: new Date() }),
        )
        .execute();
    },

    /** Participations of the given distributions, oldest first. */
    listParticipations(
      accountId: string,
      distributionIds: string[],
      tx: Executor = db,
    ): Promise<ParticipationRow[]> {
      if (distributionIds.length === 0) return Promise.resolve([]);
      return selectParticipations(tx, accountId)
        .where('p.distribution_id', 'in', distributionIds)
        .orderBy('p.created_at')
        .orderBy('p.id')
        .execute() as Promise<ParticipationRow[]>;
    },

    findParticipation(
      accountId: string,
      id: string,
      tx: Executor = db,
    ): Promise<ParticipationRow | undefined> {
      return selectParticipations(tx, accountId).where('p.id', '=', id).executeTakeFirst() as Promise<
        ParticipationRow | undefined
      >;
    },

    /** The participation's row locked for a change (so that two changes of its channel cannot race). */
    lockParticipation(accountId: string, id: string, tx: Executor) {
      return tx
        .selectFrom('participations')
        .selectAll()
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .forUpdate()
        .executeTakeFirst();
    },

    /** The currencies of the distribution's participations, but the one excepted (one currency each, decisions §8). */
    async currenciesOf(
      accountId: string,
      distributionId: string,
      exceptId: string | null,
      tx: Executor = db,
    ): Promise<string[]> {
      let query = tx
        .selectFrom('participations')
        .select('currency')
        .distinct()
        .where('account_id', '=', accountId)
        .where('distribution_id', '=', distributionId);
      if (exceptId) query = query.where('id', '!=', exceptId);
      const rows = await query.orderBy('currency').execute();
      return rows.map((row) => row.currency);
    },

    countParticipations(accountId: string, distributionId: string, tx: Executor = db) {
      return tx
        .selectFrom('participations')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('account_id', '=', accountId)
        .where('distribution_id', '=', distributionId)
        .executeTakeFirstOrThrow()
        .then((row) => Number(row.n));
    },

    async insertParticipation(
      accountId: string,
      row: ParticipationColumns & {
        id: string;
        distribution_id: string;
        partner_id: string;
        channel: string;
        address: string;
        price_cents: number;
      },
      tx: Executor = db,
    ) {
      await tx
        .insertInto('participations')
        .values({ ...jsonColumns(row), account_id: accountId })
        .execute();
    },

    async updateParticipation(
      accountId: string,
      id: string,
      columns: ParticipationColumns,
      tx: Executor = db,
    ) {
      await tx
        .updateTable('participations')
        .set({ ...jsonColumns(columns), updated_at: new Date() })
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .execute();
    },

    /** Deletes a participation (the service has made sure no rule names it). */
    async deleteParticipation(accountId: string, id: string, tx: Executor) {
      await tx
        .deleteFrom('participations')
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .execute();
    },

    /**
     * Deletes a destination no participation uses any more once it has no message left to send;
     * while one is pending it stays, so that deliveries already written still go out. Answers
     * whether it went (its sent messages are then the caller's to delete, through the engine).
     */
    async dropIdleDestination(accountId: string, destinationId: string, tx: Executor): Promise<boolean> {
      const dropped = await tx
        .deleteFrom('webhook_destinations')
        .where('account_id', '=', accountId)
        .where('id', '=', destinationId)
        .where('purpose', '=', 'participation')
        .where((eb) =>
          eb.not(
            eb.exists(
              eb
                .selectFrom('outbound_messages')
                .select('id')
                .where('account_id', '=', accountId)
                .where('destination_id', '=', destinationId)
                .where('status', '=', 'pending'),
            ),
          ),
        )
        .where((eb) =>
          eb.not(
            eb.exists(
              eb
                .selectFrom('participations')
                .select('id')
                .where('account_id', '=', accountId)
                .where('destination_id', '=', destinationId),
            ),
          ),
        )
        .returning('id')
        .executeTakeFirst();
      return dropped !== undefined;
    },

    /** Rules of the given distributions, each distribution's in the order they are tried. */
    listRules(accountId: string, distributionIds: string[], tx: Executor = db): Promise<RuleRow[]> {
      if (distributionIds.length === 0) return Promise.resolve([]);
      return tx
        .selectFrom('distribution_rules')
        .selectAll()
        .where('account_id', '=', accountId)
        .where('distribution_id', 'in', distributionIds)
        .orderBy('distribution_id')
        .orderBy('position')
        .orderBy('id')
        .execute();
    },

    /**
     * Replaces a distribution's rules: a rule whose name stays keeps its row (its id and
     * round-robin position), the others are written anew, and rules no longer named go.
     */
    async replaceRules(
      accountId: string,
      distributionId: string,
      rules: RuleColumns[],
      newIds: string[],
      tx: Executor,
    ) {
      const existing = await tx
        .selectFrom('distribution_rules')
        .select(['id', 'name'])
        .where('account_id', '=', accountId)
        .where('distribution_id', '=', distributionId)
        .forUpdate()
        .execute();
      const byName = new Map(existing.map((row) => [row.name.toLowerCase(), row.id]));
      const kept = new Set<string>();
      for (const [position, rule] of rules.entries()) {
        const columns = {
          name: rule.name,
          position,
          filter: toJson(rule.filter),
          strategy: rule.strategy,
          max_partners: rule.max_partners,
          participation_ids: rule.participation_ids,
        };
        const id = byName.get(rule.name.toLowerCase());
        if (id) {
          kept.add(id);
          await tx
            .updateTable('distribution_rules')
            .set(columns)
            .where('account_id', '=', accountId)
            .where('id', '=', id)
            .execute();
        } else {
          await tx
            .insertInto('distribution_rules')
            .values({
              ...columns,
              account_id: accountId,
              id: newIds[position]!,
              distribution_id: distributionId,
            })
            .execute();
        }
      }
      const gone = existing.filter((row) => !kept.has(row.id)).map((row) => row.id);
      if (gone.length > 0) {
        await tx
          .deleteFrom('distribution_rules')
          .where('account_id', '=', accountId)
          .where('id', 'in', gone)
          .execute();
      }
    },

    lockDistribution(accountId: string, id: string, tx: Executor) {
      return tx
        .selectFrom('distributions')
        .select('id')
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .forUpdate()
        .executeTakeFirst();
    },

    // Return reasons.

    /** A page of the account's return reasons, oldest first, after the cursor's position. */
    listReturnReasons(
      accountId: string,
      page: { limit: number; after: CursorPosition | null },
      tx: Executor = db,
    ) {
      let query = tx
        .selectFrom('return_reasons')
        .select(['id', 'name', 'created_at'])
        .where('account_id', '=', accountId);
      const { after } = page;
      if (after) {
        query = query.where(pastCursor('created_at', 'id', 'after', after.createdAt, after.id));
      }
      return query.orderBy('created_at').orderBy('id').limit(page.limit).execute();
    },

    /**
     * Serialises the additions of one account's return reasons until the transaction ends: the
     * limit is a count among many rows, which no row lock guards.
     */
    async lockReturnReasons(accountId: string, tx: Executor) {
      await lockNamed(tx, `return_reasons:${accountId}`);
    },

    countReturnReasons(accountId: string, tx: Executor = db) {
      return tx
        .selectFrom('return_reasons')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('account_id', '=', accountId)
        .executeTakeFirstOrThrow()
        .then((row) => Number(row.n));
    },

    /** Throws the unique violation (23505) when the name is taken. */
    async insertReturnReason(accountId: string, id: string, name: string, tx: Executor = db) {
      await tx.insertInto('return_reasons').values({ account_id: accountId, id, name }).execute();
    },

    async deleteReturnReason(accountId: string, id: string, tx: Executor = db) {
      const row = await tx
        .deleteFrom('return_reasons')
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .returning('id')
        .executeTakeFirst();
      return row !== undefined;
    },
  };
}

export type SetupRepo = ReturnType<typeof createSetupRepo>;

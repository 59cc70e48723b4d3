import { randomUUID } from 'node:crypto';
import type { Db, ParticipationSchedule, RuleFilter } from '../../src/db/types.ts';
import { PARTICIPATION_WEBHOOK } from '../../src/modules/distribution/distribution.service.ts';
import type { OutboundService } from '../../src/outbound/outbound.service.ts';
import { entityIdOf } from './fixtures.ts';

/** What the factory writes with: a database and the outbound engine (a TestApp has both). */
export interface FactoryTarget {
  db: Db;
  services: { outbound: Pick<OutboundService, 'createDestination'> };
}

/**
 * Distribution setups written straight into the database (partners, distributions,
 * participations, rules, return reasons), as the setup settings API stores them. A webhook
 * participation's destination is made by the outbound engine's own code, so its secret is sealed
 * as in production; the plain `whsec_` secret comes back for receivers to verify with.
 */
export function distributionFactory(t: FactoryTarget, account: { id: string }) {
  const accountId = account.id;
  return {
    async partner(
      input: { name?: string; email?: string; phone?: string; city?: string; retired?: boolean } = {},
    ) {
      const id = randomUUID();
      await t.db
        .insertInto('partners')
        .values({
          account_id: accountId,
          id,
          name: input.name ?? `Partner ${id.slice(0, 8)}`,
          email: input.email ?? `${id.slice(0, 8)}@partner.test`,
          phone: input.phone ?? '+49 30 555',
          city: input.city ?? 'Berlin',
          retired: input.retired ?? false,
        })
        .execute();
      return id;
    },

    async distribution(
      entityKey: string,
      input: { returnDeadlineDays?: number; redistributeOnReturn?: boolean; enabled?: boolean } = {},
    ) {
      const entityId = await entityIdOf(t, accountId, entityKey);
      const id = randomUUID();
      await t.db
        .insertInto('distributions')
        .values({
          account_id: accountId,
          id,
          entity_id: entityId,
          name: entityKey,
          return_deadline_days: input.returnDeadlineDays ?? 14,
          redistribute_on_return: input.redistributeOnReturn ?? false,
          enabled: input.enabled ?? true,
        })
        .execute();
      return id;
    },

    async participation(
      distributionId: string,
      input: {
        partnerId: string;
        channel?: 'webhook' | 'email';
        address: string;
        priceCents?: number;
        currency?: string;
        capPerDay?: number | null;
        capPerMonth?: number | null;
        schedule?: ParticipationSchedule | null;
        weight?: number;
        paused?: boolean;
      },
    ): Promise<{ id: string; secret: string | null; destinationId: string | null }> {
      const channel = input.channel ?? 'webhook';
      const destination =
        channel === 'webhook'
          ? await t.services.outbound.createDestination(accountId, PARTICIPATION_WEBHOOK, {
              url: input.address,
              events: [],
              description: null,
            })
          : null;
      const id = randomUUID();
      await t.db
        .insertInto('participations')
        .values({
          account_id: accountId,
          id,
          distribution_id: distributionId,
          partner_id: input.partnerId,
          channel,
          address: input.address,
          destination_id: destination?.row.id ?? null,
          price_cents: input.priceCents ?? 1000,
          currency: input.currency ?? 'EUR',
          cap_per_day: input.capPerDay ?? null,
          cap_per_month: input.capPerMonth ?? null,
          schedule: input.schedule ? JSON.stringify(input.schedule) : null,
          weight: input.weight ?? 1,
          paused: input.paused ?? false,
        })
        .execute();
      return { id, secret: destination?.secret ?? null, destinationId: destination?.row.id ?? null };
    },

    async rule(
      distributionId: string,
      input: {
        name?: string;
        position?: number;
        filter?: RuleFilter[];
        strategy?: string;
        maxPartners?: number;
        participationIds: string[];
      },
    ) {
      const id = randomUUID();
      await t.db
        .insertInto('distribution_rules')
        .values({
          account_id: accountId,
          id,
          distribution_id: distributionId,
          name: input.name ?? 'Rule',
          position: input.position ?? 0,
          filter: JSON.stringify(input.filter ?? []),
          strategy: input.strategy ?? 'all',
          max_partners: input.maxPartners ?? 1,
          participation_ids: input.participationIds,
        })
        .execute();
      return id;
    },

    async returnReason(name: string) {
      const id = randomUUID();
      await t.db.insertInto('return_reasons').values({ account_id: accountId, id, name }).execute();
      return id;
    },
  };
}

export type DistributionFactory = ReturnType<typeof distributionFactory>;

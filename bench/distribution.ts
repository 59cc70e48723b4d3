/**
 * `intake.distribution` (BENCH_SCENARIOS=intake.distribution): single-record intake with the
 * `distribution` node into an account whose entity is distributed to three webhook
 * participations on the bench's local receiver (one path each), rule strategy `all`. Each answer
 * waits for the first attempts of its three deliveries (decisions §8).
 *
 * The setup is written straight into the database while the service is stopped (the embedded
 * database admits one process), as the settings API would store it; the participations'
 * destinations are made by the outbound engine's own code with the instance secret the service
 * is started with, so that their secrets are sealed as in production.
 */
import { randomUUID } from 'node:crypto';
import { openDatabase } from '../src/db/client.ts';
import { createOutboundService } from '../src/outbound/outbound.service.ts';
import { type Bodies, type Scenario, webhookIntakeScenario } from './scenarios.ts';

export const DISTRIBUTION_PARTNERS = 3;

export interface DistributionTarget {
  databaseUrl: string | undefined;
  dataDir: string;
  /** The service's LEADS_SECRET. */
  secret: string;
  accountId: string;
  entityKey: string;
  /** The receiver's base URL; participation n posts to `<url>/hook/p<n>`. */
  receiverUrl: string;
}

/** Writes the distribution, partners, participations and rule; answers each path's signing secret. */
export async function setUpDistribution(
  target: DistributionTarget,
): Promise<{ path: string; secret: string }[]> {
  const database = await openDatabase({
    databaseUrl: target.databaseUrl,
    dataDir: target.dataDir,
    poolSize: 1,
  });
  const outbound = createOutboundService(database.db, { secret: target.secret, allowPrivate: true });
  try {
    const { db } = database;
    const accountId = target.accountId;
    const entity = await db
      .selectFrom('entities')
      .select('id')
      .where('account_id', '=', accountId)
      .where('key', '=', target.entityKey)
      .executeTakeFirstOrThrow();
    const distributionId = randomUUID();
    await db
      .insertInto('distributions')
      .values({ account_id: accountId, id: distributionId, entity_id: entity.id, name: 'Bench' })
      .execute();
    const secrets: { path: string; secret: string }[] = [];
    const participationIds: string[] = [];
    for (let n = 1; n <= DISTRIBUTION_PARTNERS; n++) {
      const partnerId = randomUUID();
      await db
        .insertInto('partners')
        .values({
          account_id: accountId,
          id: partnerId,
          name: `Bench partner ${n}`,
          email: `p${n}@bench.example`,
        })
        .execute();
      const path = `/hook/p${n}`;
      const destination = await outbound.createDestination(accountId, 'participation', {
        url: `${target.receiverUrl}${path}`,
        events: [],
        description: null,
      });
      const participationId = randomUUID();
      await db
        .insertInto('participations')
        .values({
          account_id: accountId,
          id: participationId,
          distribution_id: distributionId,
          partner_id: partnerId,
          channel: 'webhook',
          address: `${target.receiverUrl}${path}`,
          destination_id: destination.row.id,
          price_cents: 1000 + n,
        })
        .execute();
      participationIds.push(participationId);
      secrets.push({ path, secret: destination.secret });
    }
    await db
      .insertInto('distribution_rules')
      .values({
        account_id: accountId,
        id: randomUUID(),
        distribution_id: distributionId,
        name: 'Everyone',
        strategy: 'all',
        max_partners: DISTRIBUTION_PARTNERS,
        participation_ids: participationIds,
      })
      .execute();
    return secrets;
  } finally {
    outbound.close();
    await database.close();
  }
}

/** Records with the distribution node; an answer must say that all partners got the record. */
export function distributionIntakeScenario(
  bodies: Bodies,
  apiKey: string,
  onCreated: (recordId: string, answeredAt: number) => void,
): Scenario {
  const plain = webhookIntakeScenario(bodies, apiKey, onCreated);
  return {
    ...plain,
    name: 'intake.distribution',
    request: {
      ...plain.request,
      next: () => ({ body: JSON.stringify({ ...JSON.parse(bodies.record()), distribution: {} }) }),
    },
    check: (body) =>
      body?.created === true && body.distribution?.partner_count === DISTRIBUTION_PARTNERS
        ? undefined
        : `not distributed to ${DISTRIBUTION_PARTNERS} partners: ${JSON.stringify(body?.distribution)}`,
  };
}

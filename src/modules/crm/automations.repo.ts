import { sql } from 'kysely';
import { toJson } from '../../db/json.ts';
import { pastCursor } from '../../db/keyset.ts';
import { PREPARED } from '../../db/prepared.ts';
import type { Executor } from '../../db/types.ts';

export interface AutomationRow {
  id: string;
  name: string;
  action: string;
  config: Record<string, unknown>;
  enabled: boolean;
  destination_id: string | null;
  stage_id: string;
  stage: string;
  pipeline: string;
  entity_id: string;
  entity: string;
  created_at: Date;
  updated_at: Date;
  /** A webhook action's destination as the engine keeps it (null without one). */
  destination_enabled: boolean | null;
  destination_disabled_reason: string | null;
  destination_failing_since: Date | null;
}

export interface AutomationInput {
  stageId: string;
  name: string;
  action: string;
  config: Record<string, unknown>;
  enabled: boolean;
  destinationId: string | null;
}

function columnsOf(input: AutomationInput) {
  return {
    stage_id: input.stageId,
    name: input.name,
    action: input.action,
    config: toJson(input.config),
    enabled: input.enabled,
    destination_id: input.destinationId,
  };
}

function selectAutomations(tx: Executor, accountId: string) {
  return tx
    .selectFrom('automations as a')
    .innerJoin('stages as s', (join) =>
      join.onRef('s.account_id', '=', 'a.account_id').onRef('s.id', '=', 'a.stage_id'),
    )
    .innerJoin('pipelines as p', (join) =>
      join.onRef('p.account_id', '=', 's.account_id').onRef('p.id', '=', 's.pipeline_id'),
    )
    .innerJoin('entities as e', (join) =>
      join.onRef('e.account_id', '=', 'p.account_id').onRef('e.id', '=', 'p.entity_id'),
    )
    .leftJoin('webhook_destinations as d', (join) =>
      join.onRef('d.account_id', '=', 'a.account_id').onRef('d.id', '=', 'a.destination_id'),
    )
    .select([
      'a.id',
      'a.name',
      'a.action',
      'a.config',
      'a.enabled',
      'a.destination_id',
      'a.stage_id',
      's.name as stage',
      'p.name as pipeline',
      'e.id as entity_id',
      'e.key as entity',
      'a.created_at',
      'a.updated_at',
      'd.enabled as destination_enabled',
      'd.disabled_reason as destination_disabled_reason',
      'd.failing_since as destination_failing_since',
    ])
    .where('a.account_id', '=', accountId);
}

export function createAutomationsRepo(db: Executor) {
  return {
    find(accountId: string, id: string, tx: Executor = db): Promise<AutomationRow | undefined> {
      return selectAutomations(tx, accountId).where('a.id', '=', id).executeTakeFirst();
    },

    list(
      accountId: string,
      limit: number,
      after: { createdAt: string; id: string } | null,
      tx: Executor = db,
    ) {
      let query = selectAutomations(tx, accountId);
      if (after) {
        query = query.where(pastCursor('a.created_at', 'a.id', 'after', after.createdAt, after.id));
      }
      return query.orderBy('a.created_at').orderBy('a.id').limit(limit).execute();
    },

    count(accountId: string, tx: Executor = db) {
      return tx
        .selectFrom('automations')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('account_id', '=', accountId)
        .executeTakeFirstOrThrow()
        .then((row) => Number(row.n));
    },

    /** The enabled automations of an entity, whatever their stage: what a change of its definition must not break. */
    enabledOfEntity(accountId: string, entityId: string, tx: Executor = db): Promise<AutomationRow[]> {
      return selectAutomations(tx, accountId)
        .where('e.id', '=', entityId)
        .where('a.enabled', '=', true)
        .orderBy('a.created_at')
        .orderBy('a.id')
        .execute();
    },

    /** Enabled automations of a stage, in the order they were made: what a move into it runs. */
    async enabledForStage(accountId: string, stageId: string, tx: Executor = db) {
      const result = await sql<{ id: string }>`
        SELECT id FROM automations WHERE account_id = ${accountId} AND stage_id = ${stageId} AND enabled
        ORDER BY position, created_at, id ${PREPARED}`.execute(tx);
      return result.rows.map((row) => row.id);
    },

    async insert(accountId: string, id: string, input: AutomationInput, tx: Executor = db) {
      await tx
        .insertInto('automations')
        .values({ account_id: accountId, id, ...columnsOf(input) })
        .execute();
    },

    async update(accountId: string, id: string, input: AutomationInput, tx: Executor = db) {
      await tx
        .updateTable('automations')
        .set({ ...columnsOf(input), updated_at: new Date() })
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .execute();
    },

    /** Whether the run (its job id) took effect already: a retry then does nothing. */
    async runDone(accountId: string, runId: string, tx: Executor = db): Promise<boolean> {
      const result = await sql<{ id: string }>`
        SELECT id FROM automation_runs WHERE account_id = ${accountId} AND id = ${runId} ${PREPARED}`.execute(
        tx,
      );
      return result.rows.length > 0;
    },

    /**
     * Marks the run as taken effect, in the transaction of its effect; false when it was already
     * (a concurrent attempt of the same job waits here for the first one's commit, then finds it).
     */
    async claimRun(
      accountId: string,
      run: { id: string; automationId: string; recordId: string },
      tx: Executor,
    ): Promise<boolean> {
      const result = await sql<{ id: string }>`
        INSERT INTO automation_runs (account_id, id, automation_id, record_id)
        VALUES (${accountId}, ${run.id}, ${run.automationId}, ${run.recordId})
        ON CONFLICT DO NOTHING RETURNING id ${PREPARED}`.execute(tx);
      return result.rows.length > 0;
    },

    /**
     * Counts one more automation move of the chain `origin` (decisions §7) in the move's
     * transaction, unless the chain made `max` already: false then, and nothing is counted. The
     * first move of a chain writes its row with `first` (1, or more for a job queued before chains
     * were counted, which carried its depth alone). Concurrent moves of one chain wait here on
     * the row, so that each is counted once and none passes the limit.
     */
    async countChainMove(
      accountId: string,
      origin: string,
      first: number,
      max: number,
      tx: Executor,
    ): Promise<boolean> {
      if (first > max) return false;
      const result = await sql<{ moves: number }>`
        INSERT INTO automation_chains AS c (account_id, id, moves) VALUES (${accountId}, ${origin}, ${first})
        ON CONFLICT (account_id, id) DO UPDATE SET moves = c.moves + 1 WHERE c.moves < ${max}
        RETURNING moves ${PREPARED}`.execute(tx);
      return result.rows.length > 0;
    },

    /** Whether the entity has a distribution set up, enabled or not (a `distribute` action needs one). */
    async hasDistribution(accountId: string, entityId: string, tx: Executor = db): Promise<boolean> {
      const row = await tx
        .selectFrom('distributions')
        .select('id')
        .where('account_id', '=', accountId)
        .where('entity_id', '=', entityId)
        .executeTakeFirst();
      return row !== undefined;
    },

    /** The modules the account has booked now (an action of a module removed since does not run). */
    async accountModules(accountId: string, tx: Executor = db): Promise<string[]> {
      const row = await tx
        .selectFrom('accounts')
        .select('modules')
        .where('id', '=', accountId)
        .executeTakeFirst();
      return row?.modules ?? [];
    },

    async delete(accountId: string, id: string, tx: Executor = db) {
      await tx.deleteFrom('automations').where('account_id', '=', accountId).where('id', '=', id).execute();
    },
  };
}

export type AutomationsRepo = ReturnType<typeof createAutomationsRepo>;

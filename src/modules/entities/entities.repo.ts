import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { toJson } from '../../db/json.ts';
import { lockNamed } from '../../db/transaction.ts';
import type { Executor } from '../../db/types.ts';
import { emailFieldOf } from '../records/field-values.ts';
import type { DuplicateRule, EntityDef, FieldDef, PipelineDef } from './entities.model.ts';

export interface EntityInput {
  key: string;
  name: string;
  archived: boolean;
  fields: FieldDef[];
  duplicateRule: DuplicateRule | null;
  pipelines: { name: string; stages: string[] }[];
}

export function createEntitiesRepo(db: Executor) {
  return {
    /**
     * How many of the entity's records hold a value under `key` (with `among`, a value that is
     * one of those strings, or for a list one that contains one; with `'none'`, no value at all),
     * counted up to `cap` + 1 so that a large entity is not read to its end for a warning.
     */
    async countHolding(
      accountId: string,
      entityId: string,
      key: string,
      among: string[] | null | 'none',
      cap: number,
      tx: Executor = db,
    ): Promise<number> {
      const holds =
        among === null
          ? sql`fields ? ${key}`
          : among === 'none'
            ? sql`NOT fields ? ${key}`
            : sql`(fields->>${key} = ANY(${among}::text[])
              OR (jsonb_typeof(fields->${key}) = 'array' AND fields->${key} ?| ${among}::text[]))`;
      const result = await sql<{ count: number }>`
        SELECT count(*)::int AS count FROM (
          SELECT 1 FROM records WHERE account_id = ${accountId} AND entity_id = ${entityId} AND ${holds}
          LIMIT ${cap + 1}
        ) AS holding`.execute(tx);
      return result.rows[0]?.count ?? 0;
    },

    /** Every entity of the account with its active pipelines and stages, in order. */
    async loadAll(accountId: string, tx: Executor = db): Promise<EntityDef[]> {
      const entities = await tx
        .selectFrom('entities')
        .select([
          'id',
          'key',
          'name',
          'archived',
          'fields',
          'duplicate_rule',
          'created_at',
          'updated_at',
          'dedupe_recomputing',
          'dedupe_recompute_done',
          'dedupe_recompute_total',
        ])
        .where('account_id', '=', accountId)
        .orderBy('position')
        .orderBy('created_at')
        .execute();
      if (entities.length === 0) return [];
      const stages = await tx
        .selectFrom('pipelines')
        .leftJoin('stages', (join) =>
          join
            .onRef('stages.account_id', '=', 'pipelines.account_id')
            .onRef('stages.pipeline_id', '=', 'pipelines.id')
            .on('stages.archived', '=', false),
        )
        .select([
          'pipelines.entity_id',
          'pipelines.id as pipeline_id',
          'pipelines.name as pipeline_name',
          'stages.id as stage_id',
          'stages.name as stage_name',
        ])
        .where('pipelines.account_id', '=', accountId)
        .where('pipelines.archived', '=', false)
        .orderBy('pipelines.position')
        .orderBy('stages.position')
        .execute();
      const pipelinesByEntity = new Map<string, PipelineDef[]>();
      const pipelineById = new Map<string, PipelineDef>();
      for (const row of stages) {
        let pipeline = pipelineById.get(row.pipeline_id);
        if (!pipeline) {
          pipeline = { id: row.pipeline_id, name: row.pipeline_name, stages: [] };
          pipelineById.set(row.pipeline_id, pipeline);
          const list = pipelinesByEntity.get(row.entity_id) ?? [];
          list.push(pipeline);
          pipelinesByEntity.set(row.entity_id, list);
        }
        if (row.stage_id && row.stage_name) pipeline.stages.push({ id: row.stage_id, name: row.stage_name });
      }
      return entities.map((row) => ({
        id: row.id,
        key: row.key,
        name: row.name,
        archived: row.archived,
        fields: row.fields as FieldDef[],
        duplicateRule: (row.duplicate_rule as DuplicateRule | null) ?? null,
        pipelines: pipelinesByEntity.get(row.id) ?? [],
        duplicateKeys: {
          recomputing: row.dedupe_recomputing,
          done: Math.min(row.dedupe_recompute_done, row.dedupe_recompute_total),
          total: row.dedupe_recompute_total,
        },
        createdAt: row.created_at,
        updatedAt: row.updated_at,
      }));
    },

    /** The entity's fields, the row share-locked until `tx` ends (a PUT of the entity waits). */
    async lockFields(accountId: string, entityId: string, tx: Executor): Promise<FieldDef[] | undefined> {
      const row = await tx
        .selectFrom('entities')
        .select('fields')
        .where('account_id', '=', accountId)
        .where('id', '=', entityId)
        .forShare()
        .executeTakeFirst();
      return row ? (row.fields as FieldDef[]) : undefined;
    },

    /** Held until `tx` ends: one entity PUT of the account at a time, so that its limits hold. */
    async lockEntities(accountId: string, tx: Executor) {
      await lockNamed(tx, `entities:${accountId}`);
    },

    /** The account's other entities than `key`, not archived and in all, and the state of `key`'s. */
    async countOthers(
      accountId: string,
      key: string,
      tx: Executor,
    ): Promise<{ active: number; total: number; current: 'active' | 'archived' | null }> {
      const rows = await tx
        .selectFrom('entities')
        .select(['key', 'archived'])
        .where('account_id', '=', accountId)
        .execute();
      const others = rows.filter((row) => row.key !== key);
      const own = rows.find((row) => row.key === key);
      return {
        active: others.filter((row) => !row.archived).length,
        total: others.length,
        current: own ? (own.archived ? 'archived' : 'active') : null,
      };
    },

    /**
     * Creates or replaces the entity with this key. Pipelines and stages are matched by name, so
     * that records keep their stage; those the new definition drops are archived, not deleted.
     */
    async save(
      accountId: string,
      input: EntityInput,
      tx: Executor,
    ): Promise<{
      id: string;
      created: boolean;
      previousRule: DuplicateRule | null;
      previousEmailField: string | null;
    }> {
      const existing = await tx
        .selectFrom('entities')
        .select(['id', 'duplicate_rule', 'fields'])
        .where('account_id', '=', accountId)
        .where('key', '=', input.key)
        .forUpdate()
        .executeTakeFirst();
      const entityId = existing?.id ?? randomUUID();
      if (existing) {
        await tx
          .updateTable('entities')
          .set({
            name: input.name,
            archived: input.archived,
            fields: toJson(input.fields),
            duplicate_rule: input.duplicateRule ? toJson(input.duplicateRule) : null,
            updated_at: new Date(),
          })
          .where('account_id', '=', accountId)
          .where('id', '=', entityId)
          .execute();
      } else {
        await tx
          .insertInto('entities')
          .values({
            account_id: accountId,
            id: entityId,
            key: input.key,
            name: input.name,
            archived: input.archived,
            fields: toJson(input.fields),
            duplicate_rule: input.duplicateRule ? toJson(input.duplicateRule) : null,
          })
          .execute();
      }

      const oldPipelines = await tx
        .selectFrom('pipelines')
        .select(['id', 'name'])
        .where('account_id', '=', accountId)
        .where('entity_id', '=', entityId)
        .execute();
      const oldByName = new Map(oldPipelines.map((p) => [p.name, p.id]));
      const keptPipelineIds = new Set<string>();
      for (const [position, pipeline] of input.pipelines.entries()) {
        let pipelineId = oldByName.get(pipeline.name);
        if (pipelineId) {
          await tx
            .updateTable('pipelines')
            .set({ position, archived: false })
            .where('account_id', '=', accountId)
            .where('id', '=', pipelineId)
            .execute();
        } else {
          pipelineId = randomUUID();
          await tx
            .insertInto('pipelines')
            .values({
              account_id: accountId,
              id: pipelineId,
              entity_id: entityId,
              name: pipeline.name,
              position,
            })
            .execute();
        }
        keptPipelineIds.add(pipelineId);
        await saveStages(tx, accountId, pipelineId, pipeline.stages);
      }
      const dropped = oldPipelines.filter((p) => !keptPipelineIds.has(p.id)).map((p) => p.id);
      if (dropped.length > 0) {
        await tx
          .updateTable('pipelines')
          .set({ archived: true })
          .where('account_id', '=', accountId)
          .where('id', 'in', dropped)
          .execute();
      }
      return {
        id: entityId,
        created: !existing,
        previousRule: (existing?.duplicate_rule as DuplicateRule | null | undefined) ?? null,
        previousEmailField: existing ? emailFieldOf(existing.fields as FieldDef[]) : null,
      };
    },

    /**
     * Starts the duplicate keys over under the rule just saved: a new version (a recompute of an
     * older one stops at its next batch), from the first record. Returns the new version.
     */
    async restartDuplicateKeys(accountId: string, entityId: string, total: number, tx: Executor) {
      const row = await tx
        .updateTable('entities')
        .set((eb) => ({
          dedupe_rule_version: eb('dedupe_rule_version', '+', 1),
          dedupe_recomputing: total > 0,
          dedupe_recompute_cursor: null,
          dedupe_recompute_done: 0,
          dedupe_recompute_total: total,
        }))
        .where('account_id', '=', accountId)
        .where('id', '=', entityId)
        .returning('dedupe_rule_version')
        .executeTakeFirstOrThrow();
      return row.dedupe_rule_version;
    },

    /**
     * The recompute's state, locked until `tx` ends, so that a batch and a rule change never
     * overlap. The lock leaves record inserts free (their foreign-key check takes a key share).
     */
    async lockDuplicateKeys(accountId: string, entityId: string, tx: Executor) {
      const row = await tx
        .selectFrom('entities')
        .select([
          'duplicate_rule',
          'fields',
          'dedupe_rule_version',
          'dedupe_recomputing',
          'dedupe_recompute_cursor',
          'dedupe_recompute_done',
        ])
        .where('account_id', '=', accountId)
        .where('id', '=', entityId)
        .forNoKeyUpdate()
        .executeTakeFirst();
      if (!row) return undefined;
      return {
        rule: (row.duplicate_rule as DuplicateRule | null) ?? null,
        fields: row.fields as FieldDef[],
        version: row.dedupe_rule_version,
        recomputing: row.dedupe_recomputing,
        cursor: row.dedupe_recompute_cursor,
        done: row.dedupe_recompute_done,
      };
    },

    async advanceDuplicateKeys(
      accountId: string,
      entityId: string,
      progress: { cursor: string | null; done: number; finished: boolean },
      tx: Executor,
    ) {
      await tx
        .updateTable('entities')
        .set((eb) =>
          progress.finished
            ? {
                dedupe_recomputing: false,
                dedupe_recompute_cursor: null,
                dedupe_recompute_done: eb.ref('dedupe_recompute_total'),
              }
            : { dedupe_recompute_cursor: progress.cursor, dedupe_recompute_done: progress.done },
        )
        .where('account_id', '=', accountId)
        .where('id', '=', entityId)
        .execute();
    },
  };
}

async function saveStages(
  tx: Executor,
  accountId: string,
  pipelineId: string,
  names: string[],
): Promise<void> {
  const old = await tx
    .selectFrom('stages')
    .select(['id', 'name'])
    .where('account_id', '=', accountId)
    .where('pipeline_id', '=', pipelineId)
    .execute();
  const oldByName = new Map(old.map((s) => [s.name, s.id]));
  for (const [position, name] of names.entries()) {
    const stageId = oldByName.get(name);
    if (stageId) {
      await tx
        .updateTable('stages')
        .set({ position, archived: false })
        .where('account_id', '=', accountId)
        .where('id', '=', stageId)
        .execute();
    } else {
      await tx
        .insertInto('stages')
        .values({ account_id: accountId, id: randomUUID(), pipeline_id: pipelineId, name, position })
        .execute();
    }
  }
  const keep = new Set(names);
  const dropped = old.filter((s) => !keep.has(s.name)).map((s) => s.id);
  if (dropped.length > 0) {
    await tx
      .updateTable('stages')
      .set({ archived: true })
      .where('account_id', '=', accountId)
      .where('id', 'in', dropped)
      .execute();
  }
}

export type EntitiesRepo = ReturnType<typeof createEntitiesRepo>;

import { sql } from 'kysely';
import { toJson } from '../../db/json.ts';
import { PREPARED } from '../../db/prepared.ts';
import type { Executor } from '../../db/types.ts';
import { timeOrderedId } from '../../lib/ids.ts';

/** A record's row as a stage move reads it, under the row's lock. */
export interface LockedPlacement {
  id: string;
  entity_id: string;
  name: string;
  fields: Record<string, unknown>;
  source: string;
  pipeline_id: string | null;
  stage_id: string | null;
  stage_entered_at: Date | null;
  /** Names of the current pipeline and stage (archived ones too), null in none. */
  pipeline_name: string | null;
  stage_name: string | null;
  created_at: Date;
  updated_at: Date;
}

/** Stage moves and stays (decisions: Records, CRM module); a move is always part of a transaction. */
export function createCrmRepo() {
  return {
    /**
     * Locks the record's row until the transaction ends: moves of one record take turns, so that
     * each reads the stage the one before it left, and stays never overlap. The lock is taken in
     * its own step: a join in the locking query would, after waiting, pair the record's new
     * version with the stage row read before the wait.
     */
    async lockPlacement(
      accountId: string,
      recordId: string,
      tx: Executor,
    ): Promise<LockedPlacement | undefined> {
      const result = await sql<LockedPlacement>`
        WITH r AS (
          SELECT account_id, id, entity_id, name, fields, source, pipeline_id, stage_id, stage_entered_at,
            created_at, updated_at
          FROM records WHERE account_id = ${accountId} AND id = ${recordId} FOR UPDATE
        )
        SELECT r.id, r.entity_id, r.name, r.fields, r.source, r.pipeline_id, r.stage_id, r.stage_entered_at,
          p.name AS pipeline_name, s.name AS stage_name, r.created_at, r.updated_at
        FROM r
        LEFT JOIN pipelines p ON p.account_id = r.account_id AND p.id = r.pipeline_id
        LEFT JOIN stages s ON s.account_id = r.account_id AND s.id = r.stage_id ${PREPARED}`.execute(tx);
      return result.rows[0];
    },

    /**
     * Puts the record into the stage, writes the stay it ends (when it had one) and the move's
     * history event, in one statement of the caller's transaction. The time is read after the
     * lock was taken (not the transaction's start), and at least a millisecond after the stay it
     * ends began (timestamps keep milliseconds), so that stays keep their order however fast
     * moves follow each other.
     */
    async move(
      accountId: string,
      from: LockedPlacement,
      to: { pipelineId: string; stageId: string },
      event: { type: string; message: string; actor: string; data: Record<string, unknown> },
      tx: Executor,
    ): Promise<{ entered_at: Date; updated_at: Date }> {
      const endsStay = from.stage_id !== null && from.pipeline_id !== null && from.stage_entered_at !== null;
      const moved = await sql<{ entered_at: Date; updated_at: Date }>`
        WITH moved AS (
          UPDATE records SET pipeline_id = ${to.pipelineId}, stage_id = ${to.stageId},
            stage_entered_at = greatest(clock_timestamp(), stage_entered_at + interval '1 millisecond', updated_at),
            updated_at = greatest(clock_timestamp(), stage_entered_at + interval '1 millisecond', updated_at)
          WHERE account_id = ${accountId} AND id = ${from.id}
          RETURNING stage_entered_at, updated_at
        ), stay AS (
          INSERT INTO stage_history (account_id, id, record_id, pipeline_id, stage_id, entered_at, left_at)
          SELECT ${accountId}::uuid, ${timeOrderedId()}::uuid, ${from.id}::uuid, ${from.pipeline_id}::uuid,
            ${from.stage_id}::uuid, ${from.stage_entered_at}::timestamptz, moved.stage_entered_at
          FROM moved WHERE ${endsStay}::boolean
        ), event AS (
          INSERT INTO record_events (account_id, id, record_id, type, message, actor, data, created_at)
          SELECT ${accountId}::uuid, ${timeOrderedId()}::uuid, ${from.id}::uuid, ${event.type}::text,
            ${event.message}::text, ${event.actor}::text, ${toJson(event.data)}::jsonb, moved.stage_entered_at
          FROM moved
        )
        SELECT stage_entered_at AS entered_at, updated_at FROM moved ${PREPARED}`.execute(tx);
      return moved.rows[0]!;
    },
  };
}

export type CrmRepo = ReturnType<typeof createCrmRepo>;

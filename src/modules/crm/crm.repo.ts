import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { PREPARED } from '../../db/prepared.ts';
import type { Executor } from '../../db/types.ts';

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
  created_at: Date;
  updated_at: Date;
}

/** Stage moves and stays (decisions: Records, CRM module). */
export function createCrmRepo(db: Executor) {
  return {
    /**
     * Locks the record's row until the transaction ends: moves of one record take turns, so that
     * each reads the stage the one before it left, and stays never overlap.
     */
    async lockPlacement(
      accountId: string,
      recordId: string,
      tx: Executor,
    ): Promise<LockedPlacement | undefined> {
      const result = await sql<LockedPlacement>`
        SELECT id, entity_id, name, fields, source, pipeline_id, stage_id, stage_entered_at, created_at, updated_at
        FROM records WHERE account_id = ${accountId} AND id = ${recordId} FOR UPDATE ${PREPARED}`.execute(tx);
      return result.rows[0];
    },

    /**
     * Puts the record into the stage and writes the stay it ends (when it had one), in the
     * caller's transaction. The time is read after the lock was taken (not the transaction's
     * start), and never before the stay it ends began, so that a move that waited for another
     * starts its stay after the other's.
     */
    async move(
      accountId: string,
      from: LockedPlacement,
      to: { pipelineId: string; stageId: string },
      tx: Executor,
    ): Promise<{ entered_at: Date; updated_at: Date }> {
      const moved = await sql<{ entered_at: Date; updated_at: Date }>`
        UPDATE records SET pipeline_id = ${to.pipelineId}, stage_id = ${to.stageId},
          stage_entered_at = greatest(clock_timestamp(), stage_entered_at, updated_at),
          updated_at = greatest(clock_timestamp(), stage_entered_at, updated_at)
        WHERE account_id = ${accountId} AND id = ${from.id}
        RETURNING stage_entered_at AS entered_at, updated_at ${PREPARED}`.execute(tx);
      const row = moved.rows[0]!;
      if (from.stage_id && from.pipeline_id && from.stage_entered_at) {
        await sql`
          INSERT INTO stage_history (account_id, id, record_id, pipeline_id, stage_id, entered_at, left_at)
          VALUES (${accountId}, ${randomUUID()}, ${from.id}, ${from.pipeline_id}, ${from.stage_id},
            ${from.stage_entered_at}, ${row.entered_at}) ${PREPARED}`.execute(tx);
      }
      return row;
    },

    /** Names of a pipeline and a stage, archived ones included (a record may sit in one). */
    async stageNames(accountId: string, stageId: string, tx: Executor = db) {
      const result = await sql<{ pipeline: string; stage: string }>`
        SELECT p.name AS pipeline, s.name AS stage FROM stages s
        JOIN pipelines p ON p.account_id = s.account_id AND p.id = s.pipeline_id
        WHERE s.account_id = ${accountId} AND s.id = ${stageId} ${PREPARED}`.execute(tx);
      return result.rows[0];
    },
  };
}

export type CrmRepo = ReturnType<typeof createCrmRepo>;

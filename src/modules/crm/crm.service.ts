import type { Db, Executor } from '../../db/types.ts';
import { AppError } from '../../http/errors.ts';
import { iso } from '../../http/schemas.ts';
import type { OutboundService } from '../../outbound/outbound.service.ts';
import type { EntitiesService } from '../entities/entities.service.ts';
import { recordEventData } from '../records/record-webhooks.ts';
import type { CrmRepo } from './crm.repo.ts';
import { pipelineOfStage, resolveStage, type StageTarget } from './crm.stages.ts';

/** Who moves a stage: written into the history as the actor (see records history). */
export interface MoveContext {
  accountId: string;
  /** Stored actor: `api:<key name>`, `automation:<name>`, … */
  actor: string;
  requestId: string;
  /** Moves made so far by the request this move comes from (automation chains; 0 for a request). */
  chain: number;
  /**
   * The chain of automation moves this move belongs to (decisions §7): minted by a request's move
   * for the jobs it queues, carried by every automation move that follows from it.
   */
  origin?: string;
  /**
   * An automation's move applies only while the record is in the stay that queued it (its stage
   * and `entered_at`, as the move into it answered them): else it moves nothing and answers
   * `refused: "left_stage"`. Absent fields are not compared (jobs queued before they existed).
   */
  stay?: { stageId?: string; enteredAt?: string };
  /**
   * Asked in the move's transaction, under the record's lock, once the move will move the record
   * and before it does: a reason refuses the move (nothing moves, `refused` names it).
   */
  admit?: (tx: Executor) => Promise<string | null>;
}

export interface StageMove {
  id: string;
  entityKey: string;
  crm: { pipeline: string; stage: string; entered_at: string };
  /** The stage the record left (its current one for a no-op), null when it had none. */
  previous: string | null;
  moved: boolean;
  stageId: string;
  /** Why a move with `stay` or `admit` moved nothing: `left_stage`, or the reason `admit` gave. */
  refused?: string;
}

export interface CrmServiceDeps {
  db: Db;
  entities: EntitiesService;
  repo: CrmRepo;
  outbound: Pick<OutboundService, 'emitEvent'>;
  /** Runs in the move's transaction after the record moved: the automations of the target stage. */
  afterMove?: (tx: Executor, ctx: MoveContext, move: StageMove) => Promise<void>;
}

export function createCrmService({ db, entities, repo, outbound, afterMove }: CrmServiceDeps) {
  const hooks = { afterMove };

  /**
   * The one stage move (decisions §7), whoever asks: the stage endpoint, S1 status changes and
   * automations. The record's row is locked first, so that concurrent moves of one record take
   * turns; the stay it ends, the row, the history event, the account webhooks and the target
   * stage's automations are written in the caller's transaction.
   */
  async function moveWithin(
    tx: Executor,
    ctx: MoveContext,
    recordId: string,
    target: StageTarget,
    /** The request's name of the stage, for a 422 (S1 calls it `status_step`). */
    stageKey = 'stage',
  ): Promise<StageMove> {
    const row = await repo.lockPlacement(ctx.accountId, recordId, tx);
    if (!row) throw new AppError('not_found', { message: 'Record not found' });
    const entity = await entities.find(ctx.accountId, row.entity_id, tx);
    if (!entity) throw new AppError('not_found', { message: 'Record not found' });
    const here = () => ({
      id: row.id,
      entityKey: entity.key,
      crm: {
        pipeline: row.pipeline_name ?? '',
        stage: row.stage_name ?? '',
        entered_at: iso(row.stage_entered_at ?? row.created_at),
      },
      previous: row.stage_name,
      moved: false,
      stageId: row.stage_id ?? '',
    });
    const stay = ctx.stay;
    if (
      stay &&
      ((stay.stageId !== undefined && row.stage_id !== stay.stageId) ||
        (stay.enteredAt !== undefined &&
          (row.stage_entered_at === null || iso(row.stage_entered_at) !== stay.enteredAt)))
    ) {
      return { ...here(), refused: 'left_stage' };
    }
    let named = target;
    if (target.pipelineFromStage && !target.pipeline && entity.pipelines.length > 1) {
      const pipeline = pipelineOfStage(entity, target.stage, row.pipeline_name);
      if (pipeline === null) {
        throw new AppError('validation_failed', {
          details: [
            { key: stageKey, reason: 'not_allowed', message: `no stage ${target.stage} on ${entity.key}` },
          ],
        });
      }
      named = { ...target, pipeline };
    }
    const placement = resolveStage(entity, named);
    if ('reason' in placement) {
      const key = placement.key === 'stage' ? stageKey : placement.key;
      throw new AppError('validation_failed', { details: [{ ...placement, key }] });
    }
    const to = { pipeline: placement.pipeline.name, stage: placement.stage.name };
    if (row.stage_id === placement.stage.id) {
      return {
        id: row.id,
        entityKey: entity.key,
        crm: { ...to, entered_at: iso(row.stage_entered_at ?? row.created_at) },
        previous: to.stage,
        moved: false,
        stageId: placement.stage.id,
      };
    }
    const refused = await ctx.admit?.(tx);
    if (refused) return { ...here(), refused };
    const previous =
      row.pipeline_name !== null && row.stage_name !== null
        ? { pipeline: row.pipeline_name, stage: row.stage_name }
        : null;
    const moved = await repo.move(
      ctx.accountId,
      row,
      { pipelineId: placement.pipeline.id, stageId: placement.stage.id },
      {
        type: 'stage_changed',
        message: previous ? `Stage ${previous.stage} → ${to.stage}` : `Stage ${to.stage}`,
        actor: ctx.actor,
        data: { ...to, previous, request_id: ctx.requestId },
      },
      tx,
    );
    const enteredAt = iso(moved.entered_at);
    await outbound.emitEvent(tx, ctx.accountId, 'record.stage_changed', {
      ...recordEventData(entity.key, { ...row, updated_at: moved.updated_at }),
      crm: { ...to, entered_at: enteredAt },
      previous,
    });
    const result: StageMove = {
      id: row.id,
      entityKey: entity.key,
      crm: { ...to, entered_at: enteredAt },
      previous: previous?.stage ?? null,
      moved: true,
      stageId: placement.stage.id,
    };
    await hooks.afterMove?.(tx, ctx, result);
    return result;
  }

  return {
    moveWithin,

    /** A stage move in its own transaction (the stage endpoint, S1 status changes). */
    moveStage(
      ctx: MoveContext,
      recordId: string,
      target: StageTarget,
      stageKey = 'stage',
    ): Promise<StageMove> {
      return db.transaction().execute((tx) => moveWithin(tx, ctx, recordId, target, stageKey));
    },

    /** Set once the automations exist (they move stages themselves, so they come after). */
    setAfterMove(hook: NonNullable<CrmServiceDeps['afterMove']>) {
      hooks.afterMove = hook;
    },
  };
}

export type CrmService = ReturnType<typeof createCrmService>;

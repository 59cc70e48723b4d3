import type { ValidationDetail } from '../../http/errors.ts';
import type { EntityDef, PipelineDef, StageDef } from '../entities/entities.model.ts';

/** A stage as a caller names it: stage name (or id), and the pipeline when the entity has several. */
export interface StageTarget {
  stage: string;
  pipeline?: string | null;
  /**
   * No pipeline named, the entity has several: the record's own pipeline when it has the stage,
   * else the one pipeline that has it (S1's status change, whose interface names no pipeline).
   */
  pipelineFromStage?: boolean;
}

/** A pipeline's stage by its exact name or its id (any case). */
function stageIn(pipeline: PipelineDef, nameOrId: string): StageDef | undefined {
  return pipeline.stages.find((s) => s.name === nameOrId || s.id === nameOrId.toLowerCase());
}

/**
 * The pipeline a stage name points to when none is named (`pipelineFromStage`): the current one
 * if it has the stage, else the only one that has it. Undefined when several others have it
 * (`resolveStage` then asks for a pipeline), null when none has it.
 */
export function pipelineOfStage(
  entity: EntityDef,
  stage: string,
  currentPipeline: string | null,
): string | null | undefined {
  const having = entity.pipelines.filter((p) => stageIn(p, stage) !== undefined);
  if (having.length === 0) return null;
  if (currentPipeline !== null && having.some((p) => p.name === currentPipeline)) return currentPipeline;
  return having.length === 1 ? having[0]!.name : undefined;
}

export interface Placement {
  pipeline: PipelineDef;
  stage: StageDef;
}

/**
 * The one rule that turns names into a stage (decisions §7), for every door that places or moves
 * a record: intake's `crm` node and S1 `status:<pipeline>`, the stage move, S1 status changes and
 * automations. Names match exactly, ids case-insensitively; `keyPrefix` prefixes the detail keys
 * (`crm.stage`, `status:sales.stage`).
 */
export function resolveStage(
  entity: EntityDef,
  target: StageTarget,
  keyPrefix = '',
): Placement | ValidationDetail {
  let pipeline: PipelineDef | undefined;
  if (target.pipeline) {
    const wanted = target.pipeline;
    pipeline = entity.pipelines.find((p) => p.name === wanted || p.id === wanted.toLowerCase());
    if (!pipeline) {
      return {
        key: `${keyPrefix}pipeline`,
        reason: 'not_allowed',
        message: `no pipeline ${wanted} on ${entity.key}`,
      };
    }
  } else if (entity.pipelines.length === 1) {
    pipeline = entity.pipelines[0]!;
  } else if (entity.pipelines.length === 0) {
    return { key: `${keyPrefix}stage`, reason: 'not_allowed', message: `${entity.key} has no pipeline` };
  } else {
    return {
      key: `${keyPrefix}pipeline`,
      reason: 'pipeline_required',
      message: `${entity.key} has several pipelines: name one`,
    };
  }
  const stage = stageIn(pipeline, target.stage);
  if (!stage) {
    return {
      key: `${keyPrefix}stage`,
      reason: 'not_allowed',
      message: `no stage ${target.stage} in ${pipeline.name}`,
    };
  }
  return { pipeline, stage };
}

/** Where a new record of the entity starts when intake names no stage: the first stage of the first pipeline. */
export function firstStage(entity: EntityDef): Placement | null {
  const pipeline = entity.pipelines[0];
  const stage = pipeline?.stages[0];
  return pipeline && stage ? { pipeline, stage } : null;
}

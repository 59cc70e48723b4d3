import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { accountIdOf, actorOf, callerOf } from '../../http/auth.ts';
import { IdParams, NoQuery, s1Errors, s2Errors } from '../../http/schemas.ts';
import type { EntitiesService } from '../entities/entities.service.ts';
import { S1StatusBody, S1StatusResponse, StageMoveBody, StageMoveResponse } from './crm.schemas.ts';
import type { CrmService, MoveContext } from './crm.service.ts';

const auth = { accept: ['api_key' as const], permission: 'crm' as const, module: 'crm' as const };
/** A stage move is a member's work (decisions §14). */
const move = { ...auth, role: 'member' as const };

const PipelineList = Type.Object({
  entities: Type.Array(
    Type.Object({
      key: Type.String(),
      pipelines: Type.Array(Type.Object({ name: Type.String(), stages: Type.Array(Type.String()) })),
    }),
  ),
});

function moveContext(request: FastifyRequest): MoveContext {
  const caller = callerOf(request);
  return { accountId: caller.account.id, actor: actorOf(caller), requestId: request.id, chain: 0 };
}

export const crmRoutes: FastifyPluginAsyncTypebox<{ entities: EntitiesService; crm: CrmService }> = async (
  app,
  { entities, crm },
) => {
  app.get(
    '/api/v1/crm/pipelines',
    {
      config: { auth },
      schema: {
        tags: ['CRM'],
        operationId: 'listPipelines',
        summary: 'Pipelines and their stages, per entity',
        querystring: NoQuery,
        response: { 200: PipelineList, ...s2Errors },
      },
    },
    async (request) => ({
      entities: (await entities.all(accountIdOf(request)))
        .filter((entity) => !entity.archived)
        .map((entity) => ({
          key: entity.key,
          pipelines: entity.pipelines.map((p) => ({ name: p.name, stages: p.stages.map((s) => s.name) })),
        })),
    }),
  );

  app.post(
    '/api/v1/crm/records/:id/stage',
    {
      config: { auth: move },
      schema: {
        tags: ['CRM'],
        operationId: 'moveRecordStage',
        summary:
          "Move a record to a stage: its stay, history, webhooks and the target stage's automations follow; the same stage is a no-op",
        params: IdParams,
        body: StageMoveBody,
        querystring: NoQuery,
        response: { 200: StageMoveResponse, ...s2Errors },
      },
    },
    async (request) => {
      const move = await crm.moveStage(moveContext(request), request.params.id, request.body);
      return { id: move.id, crm: move.crm, previous: move.previous };
    },
  );

  app.patch(
    '/api/leads/:id/status',
    {
      config: { auth: move },
      // No querystring schema: like every S1 route it takes any query parameter (S1 clients send what they send).
      schema: {
        tags: ['S1'],
        operationId: 'updateLeadStatusS1',
        summary: 'Move a lead to a status (the stage move; automations of the status run)',
        params: IdParams,
        body: S1StatusBody,
        response: { 200: S1StatusResponse, ...s1Errors },
      },
    },
    async (request) => {
      const { status_step: stage, pipeline } = request.body;
      const move = await crm.moveStage(
        moveContext(request),
        request.params.id,
        // The interface's status change names no pipeline: the stage name finds it.
        { stage, pipeline, pipelineFromStage: true },
        'status_step',
      );
      return { status: 'success' as const, lead_id: move.id, new_status: move.crm.stage };
    },
  );
};

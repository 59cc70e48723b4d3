import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../../http/auth.ts';
import { s2Errors } from '../../http/schemas.ts';
import type { EntitiesService } from '../entities/entities.service.ts';

const auth = { accept: ['api_key' as const], permission: 'crm' as const, module: 'crm' as const };

const PipelineList = Type.Object({
  entities: Type.Array(
    Type.Object({
      key: Type.String(),
      pipelines: Type.Array(Type.Object({ name: Type.String(), stages: Type.Array(Type.String()) })),
    }),
  ),
});

export const crmRoutes: FastifyPluginAsyncTypebox<{ entities: EntitiesService }> = async (
  app,
  { entities },
) => {
  app.get(
    '/api/v1/crm/pipelines',
    {
      config: { auth },
      schema: {
        tags: ['CRM'],
        operationId: 'listPipelines',
        summary: 'Pipelines and their stages, per entity',
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
};

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { s2Errors } from '../../http/schemas.ts';

export const systemRoutes: FastifyPluginAsyncTypebox<{ checkDatabase: () => Promise<void> }> = async (
  app,
  { checkDatabase },
) => {
  app.get('/api/v1/openapi.json', { schema: { hide: true } }, async (_request, reply) =>
    reply.type('application/json; charset=utf-8').send(app.swagger()),
  );

  app.get(
    '/health',
    {
      schema: {
        tags: ['System'],
        operationId: 'getHealth',
        summary: 'Liveness and database reachability',
        response: { 200: Type.Object({ status: Type.Literal('ok') }), ...s2Errors },
      },
    },
    async () => {
      await checkDatabase();
      return { status: 'ok' as const };
    },
  );
};

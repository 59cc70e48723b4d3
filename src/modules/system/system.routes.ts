import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { AppError } from '../../http/errors.ts';
import { s2Errors } from '../../http/schemas.ts';
import { loadGuide } from './guide.ts';

export const systemRoutes: FastifyPluginAsyncTypebox<{ checkDatabase: () => Promise<void> }> = async (
  app,
  { checkDatabase },
) => {
  app.get('/api/v1/openapi.json', { schema: { hide: true } }, async (_request, reply) =>
    reply.type('application/json; charset=utf-8').send(app.swagger()),
  );

  const guide = await loadGuide();
  app.get('/docs/guide', { schema: { hide: true } }, async (_request, reply) =>
    reply.redirect('/docs/guide/README.md', 302),
  );
  app.get('/docs/guide/:page', { schema: { hide: true } }, async (request, reply) => {
    const page = guide.get((request.params as { page: string }).page);
    if (page === undefined) throw new AppError('unknown_endpoint', { message: 'No route at that address' });
    // nosniff: a browser shows the Markdown as text and never guesses another type for it.
    return reply.type('text/markdown; charset=utf-8').header('x-content-type-options', 'nosniff').send(page);
  });

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

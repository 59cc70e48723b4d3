import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../../http/auth.ts';
import { IdParams, NextCursor, PageQuery, s2Errors, Timestamp, Uuid } from '../../http/schemas.ts';
import type { SourcesService } from './sources.service.ts';

const auth = { accept: ['api_key' as const], permission: 'settings' as const };
const tags = ['Settings: sources'];
const Token = Type.String({ description: 'Source token for POST /api/v1/in/{token}; shown only here' });

export const sourcesRoutes: FastifyPluginAsyncTypebox<{ sources: SourcesService }> = async (
  app,
  { sources },
) => {
  app.post(
    '/api/v1/settings/sources',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'createSource',
        summary: 'Create a source and its token',
        body: Type.Object(
          { name: Type.String({ minLength: 1, maxLength: 100 }) },
          { additionalProperties: false },
        ),
        response: {
          201: Type.Object({ id: Uuid, name: Type.String(), token: Token, created_at: Timestamp }),
          ...s2Errors,
        },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await sources.create(accountIdOf(request), request.body.name)),
  );

  app.get(
    '/api/v1/settings/sources',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'listSources',
        summary: 'List sources with the prefix of their active token',
        querystring: PageQuery,
        response: {
          200: Type.Object({
            sources: Type.Array(
              Type.Object({
                id: Uuid,
                name: Type.String(),
                token_prefix: Type.Union([Type.String(), Type.Null()]),
                created_at: Timestamp,
              }),
            ),
            next_cursor: NextCursor,
          }),
          ...s2Errors,
        },
      },
    },
    async (request) => sources.list(accountIdOf(request), request.query.limit ?? 100, request.query.cursor),
  );

  app.post(
    '/api/v1/settings/sources/:id/token',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'rotateSourceToken',
        summary: 'Issue a new token; the old one stops working',
        params: IdParams,
        response: { 201: Type.Object({ token: Token }), ...s2Errors },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await sources.rotateToken(accountIdOf(request), request.params.id)),
  );

  app.delete(
    '/api/v1/settings/sources/:id/token',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'revokeSourceToken',
        summary: 'Revoke the source token',
        params: IdParams,
        response: { 204: Type.Null(), ...s2Errors },
      },
    },
    async (request, reply) => {
      await sources.revokeToken(accountIdOf(request), request.params.id);
      return reply.code(204).send(null);
    },
  );
};

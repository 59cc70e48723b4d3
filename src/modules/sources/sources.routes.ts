import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../../http/auth.ts';
import { IdParams, PageQuery, s2Errors } from '../../http/schemas.ts';
import {
  CreatedSource,
  CreateSourceBody,
  IntakeUrl,
  MAX_SOURCES,
  SourceList,
  SourceView,
  Token,
  UpdateSourceBody,
} from './sources.schemas.ts';
import type { SourcesService } from './sources.service.ts';

const auth = { accept: ['api_key' as const], permission: 'settings' as const };
const tags = ['Settings: sources'];

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
        summary: 'Create a source and its token, with its website-form settings',
        description: `At most ${MAX_SOURCES} sources per account: one more answers 422 validation_failed, reason \`too_many\`, keyed \`name\`.`,
        body: CreateSourceBody,
        response: { 201: CreatedSource, ...s2Errors },
      },
    },
    async (request, reply) => reply.code(201).send(await sources.create(accountIdOf(request), request.body)),
  );

  app.get(
    '/api/v1/settings/sources',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'listSources',
        summary: 'List sources with the prefix of their active token and their settings',
        querystring: PageQuery,
        response: { 200: SourceList, ...s2Errors },
      },
    },
    async (request) => sources.list(accountIdOf(request), request.query.limit ?? 100, request.query.cursor),
  );

  app.get(
    '/api/v1/settings/sources/:id',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'getSource',
        summary: 'Read a source and its website-form settings',
        params: IdParams,
        response: { 200: SourceView, ...s2Errors },
      },
    },
    async (request) => sources.get(accountIdOf(request), request.params.id),
  );

  app.patch(
    '/api/v1/settings/sources/:id',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'updateSource',
        summary: 'Change a source’s name or website-form settings; a missing key is unchanged',
        params: IdParams,
        body: UpdateSourceBody,
        response: { 200: SourceView, ...s2Errors },
      },
    },
    async (request) => sources.update(accountIdOf(request), request.params.id, request.body),
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
        response: { 201: Type.Object({ token: Token, intake_url: IntakeUrl }), ...s2Errors },
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

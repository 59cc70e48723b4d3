import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf, callerOf } from '../../http/auth.ts';
import { IdParams, PageQuery, s2Errors } from '../../http/schemas.ts';
import { ApiKey, ApiKeyList, CreateApiKeyBody, CreatedApiKey, UpdateApiKeyBody } from './api-keys.schemas.ts';
import type { ApiKeysService, KeyMaker } from './api-keys.service.ts';

const auth = { accept: ['api_key' as const], permission: 'settings' as const };
const tags = ['Settings: API keys'];

export const apiKeysRoutes: FastifyPluginAsyncTypebox<{ apiKeys: ApiKeysService }> = async (
  app,
  { apiKeys },
) => {
  app.post(
    '/api/v1/settings/api-keys',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'createApiKey',
        summary: 'Create an API key (its value is shown only in this answer)',
        body: CreateApiKeyBody,
        response: { 201: CreatedApiKey, ...s2Errors },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      const maker: KeyMaker =
        caller.kind === 'session'
          ? { kind: 'session', role: caller.user.role }
          : { kind: 'api_key', managesUsers: caller.managesUsers, permissions: caller.permissions };
      return reply.code(201).send(await apiKeys.create(caller.account.id, request.body, maker));
    },
  );

  app.get(
    '/api/v1/settings/api-keys',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'listApiKeys',
        summary: 'List active API keys (without values)',
        querystring: PageQuery,
        response: { 200: ApiKeyList, ...s2Errors },
      },
    },
    async (request) => apiKeys.list(accountIdOf(request), request.query.limit ?? 100, request.query.cursor),
  );

  app.patch(
    '/api/v1/settings/api-keys/:id',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'updateApiKey',
        summary: 'Rename a key or switch strict mode',
        params: IdParams,
        body: UpdateApiKeyBody,
        response: { 200: ApiKey, ...s2Errors },
      },
    },
    async (request) => apiKeys.update(accountIdOf(request), request.params.id, request.body),
  );

  app.delete(
    '/api/v1/settings/api-keys/:id',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'revokeApiKey',
        summary: 'Revoke a key; it stops working at once',
        params: IdParams,
        response: { 204: Type.Null(), ...s2Errors },
      },
    },
    async (request, reply) => {
      await apiKeys.revoke(accountIdOf(request), request.params.id);
      return reply.code(204).send(null);
    },
  );
};

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { accountIdOf, credentialOf } from '../../http/auth.ts';
import { IdParams, MessageAttemptList, NoQuery, PageQuery, s2Errors } from '../../http/schemas.ts';
import {
  Automation,
  AutomationList,
  AutomationRefused,
  AutomationWithSecret,
  CreateAutomationBody,
  UpdateAutomationBody,
} from './automations.schemas.ts';
import type { AutomationsService } from './automations.service.ts';

const auth = { accept: ['api_key' as const], permission: 'settings' as const, module: 'crm' as const };
const tags = ['CRM'];

/** The account's booked modules (a `distribute` action needs the distribution module). */
function modulesOf(request: FastifyRequest): string[] {
  return credentialOf(request).account.modules;
}

/** An API key's permissions (email and webhook actions need `records:read`); null for a session. */
function keyPermissionsOf(request: FastifyRequest): readonly string[] | null {
  const credential = credentialOf(request);
  return credential.kind === 'api_key' ? credential.permissions : null;
}

/** Settings API of CRM automations (decisions §7). */
export const automationsRoutes: FastifyPluginAsyncTypebox<{ automations: AutomationsService }> = async (
  app,
  { automations },
) => {
  app.post(
    '/api/v1/settings/automations',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'createAutomation',
        summary: 'Add an automation to a stage; a webhook action answers its signing secret once',
        body: CreateAutomationBody,
        querystring: NoQuery,
        response: { 201: AutomationWithSecret, 422: AutomationRefused, ...s2Errors },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        .send(
          await automations.create(
            accountIdOf(request),
            request.body,
            modulesOf(request),
            keyPermissionsOf(request),
          ),
        ),
  );

  app.get(
    '/api/v1/settings/automations',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'listAutomations',
        summary: 'The automations of the account, oldest first',
        querystring: PageQuery,
        response: { 200: AutomationList, ...s2Errors },
      },
    },
    async (request) => automations.list(accountIdOf(request), request.query),
  );

  app.get(
    '/api/v1/settings/automations/:id',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'getAutomation',
        summary: 'One automation',
        params: IdParams,
        querystring: NoQuery,
        response: { 200: Automation, ...s2Errors },
      },
    },
    async (request) => automations.get(accountIdOf(request), request.params.id),
  );

  app.patch(
    '/api/v1/settings/automations/:id',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'updateAutomation',
        summary: 'Change an automation; what is not named stays',
        params: IdParams,
        body: UpdateAutomationBody,
        querystring: NoQuery,
        response: { 200: AutomationWithSecret, 422: AutomationRefused, ...s2Errors },
      },
    },
    async (request) =>
      automations.update(
        accountIdOf(request),
        request.params.id,
        request.body,
        modulesOf(request),
        keyPermissionsOf(request),
      ),
  );

  app.get(
    '/api/v1/settings/automations/:id/attempts',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'listAutomationAttempts',
        summary:
          "Attempts to send the automation's webhook or email messages, newest first (retries included; other actions send none)",
        params: IdParams,
        querystring: PageQuery,
        response: { 200: MessageAttemptList, ...s2Errors },
      },
    },
    async (request) => automations.attempts(accountIdOf(request), request.params.id, request.query),
  );

  app.delete(
    '/api/v1/settings/automations/:id',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'deleteAutomation',
        summary: 'Delete an automation (runs already queued find it gone and do nothing)',
        params: IdParams,
        querystring: NoQuery,
        response: { 204: Type.Null(), ...s2Errors },
      },
    },
    async (request, reply) => {
      await automations.remove(accountIdOf(request), request.params.id);
      return reply.code(204).send(null);
    },
  );
};

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../../http/auth.ts';
import { IdParams, MessageAttemptList, PageQuery, s2Errors } from '../../http/schemas.ts';
import {
  CreateWebhookBody,
  RecoveredWebhook,
  RecoverWebhookBody,
  UpdatedWebhook,
  UpdateWebhookBody,
  Webhook,
  WebhookList,
  WebhookTestResult,
  WebhookWithSecret,
} from './webhooks.schemas.ts';
import type { WebhooksService } from './webhooks.service.ts';

const auth = { accept: ['api_key' as const], permission: 'settings' as const };
/** Where the record data of events goes: a key needs `records:read` too (docs/decisions.md). */
const subscribing = { ...auth, alsoPermission: 'records:read' as const };
const tags = ['Settings: webhooks'];

export const webhooksRoutes: FastifyPluginAsyncTypebox<{ webhooks: WebhooksService }> = async (
  app,
  { webhooks },
) => {
  app.post(
    '/api/v1/settings/webhooks',
    {
      config: { auth: subscribing },
      schema: {
        tags,
        summary: 'Subscribe an endpoint to events (its signing secret is shown only in this answer)',
        body: CreateWebhookBody,
        response: { 201: WebhookWithSecret, ...s2Errors },
      },
    },
    async (request, reply) => reply.code(201).send(await webhooks.create(accountIdOf(request), request.body)),
  );

  app.get(
    '/api/v1/settings/webhooks',
    {
      config: { auth },
      schema: {
        tags,
        summary: 'List webhooks',
        querystring: PageQuery,
        response: { 200: WebhookList, ...s2Errors },
      },
    },
    async (request) => webhooks.list(accountIdOf(request), request.query.limit ?? 100, request.query.cursor),
  );

  app.get(
    '/api/v1/settings/webhooks/:id',
    {
      config: { auth },
      schema: { tags, summary: 'Read a webhook', params: IdParams, response: { 200: Webhook, ...s2Errors } },
    },
    async (request) => webhooks.get(accountIdOf(request), request.params.id),
  );

  app.patch(
    '/api/v1/settings/webhooks/:id',
    {
      config: { auth: subscribing },
      schema: {
        tags,
        summary: 'Change a webhook, enable it again, or rotate its secret (the new one is shown once)',
        params: IdParams,
        body: UpdateWebhookBody,
        response: { 200: UpdatedWebhook, ...s2Errors },
      },
    },
    async (request) => webhooks.update(accountIdOf(request), request.params.id, request.body),
  );

  app.delete(
    '/api/v1/settings/webhooks/:id',
    {
      config: { auth },
      schema: {
        tags,
        summary: 'Delete a webhook; its pending messages are dropped',
        params: IdParams,
        response: { 204: Type.Null(), ...s2Errors },
      },
    },
    async (request, reply) => {
      await webhooks.remove(accountIdOf(request), request.params.id);
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/api/v1/settings/webhooks/:id/test',
    {
      config: { auth },
      schema: {
        tags,
        summary: 'Send a webhook.test message now and answer with what the receiver said',
        params: IdParams,
        response: { 200: WebhookTestResult, ...s2Errors },
      },
    },
    async (request) => webhooks.test(accountIdOf(request), request.params.id),
  );

  app.post(
    '/api/v1/settings/webhooks/:id/recover',
    {
      // It sends records out again, as a subscription does.
      config: { auth: subscribing },
      schema: {
        tags,
        summary: "Queue the webhook's failed messages of a time window for one more attempt each",
        description:
          'After an outage of the receiver: each failed message written within [since, until) is sent once more, with its own id (a receiver that kept it can tell), oldest first, at most 1,000 a call (`more` says whether to call again). The webhook must be enabled (409 `conflict`). Test messages are not resent.',
        params: IdParams,
        body: RecoverWebhookBody,
        response: { 202: RecoveredWebhook, ...s2Errors },
      },
    },
    async (request, reply) =>
      reply.code(202).send(await webhooks.recover(accountIdOf(request), request.params.id, request.body)),
  );

  app.get(
    '/api/v1/settings/webhooks/:id/attempts',
    {
      config: { auth },
      schema: {
        tags,
        summary: "Recent attempts of the webhook's messages, newest first",
        params: IdParams,
        querystring: PageQuery,
        response: { 200: MessageAttemptList, ...s2Errors },
      },
    },
    async (request) =>
      webhooks.attempts(
        accountIdOf(request),
        request.params.id,
        request.query.limit ?? 100,
        request.query.cursor,
      ),
  );
};

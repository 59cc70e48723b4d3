import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { accountIdOf, actorOf, callerOf } from '../../http/auth.ts';
import { IdParams, MessageAttemptList, PageQuery, s2Errors } from '../../http/schemas.ts';
import type { DeliveriesService } from './deliveries.service.ts';
import {
  DeliveriesQuery,
  DeliveryList,
  DistributionRun,
  ParticipationTestResult,
  ReturnBody,
  ReturnResponse,
  StartDistributionBody,
  StartDistributionResponse,
} from './distribution.schemas.ts';
import type { DistributionService } from './distribution.service.ts';

const auth = {
  accept: ['api_key' as const],
  permission: 'distribution' as const,
  module: 'distribution' as const,
};
const tags = ['Distribution'];

export const distributionRoutes: FastifyPluginAsyncTypebox<{
  distribution: DistributionService;
  deliveries: DeliveriesService;
}> = async (app, { distribution, deliveries }) => {
  app.post(
    '/api/v1/distribution/distributions',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'startDistribution',
        summary:
          'Distribute a record: the first matching rule chooses partners, the run commits, and the answer waits up to 10 s for the first attempts',
        body: StartDistributionBody,
        response: { 200: StartDistributionResponse, ...s2Errors },
      },
    },
    async (request) =>
      distribution.start(accountIdOf(request), request.body.record_id, actorOf(callerOf(request))),
  );

  app.get(
    '/api/v1/distribution/distributions/:id',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'getDistribution',
        summary: 'Read a distribution run with its deliveries',
        params: IdParams,
        response: { 200: DistributionRun, ...s2Errors },
      },
    },
    async (request) => distribution.run(accountIdOf(request), request.params.id),
  );

  app.get(
    '/api/v1/distribution/deliveries',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'listDeliveries',
        summary: 'Deliveries, newest first, filtered like the on-screen list (200 by default, at most 500)',
        querystring: DeliveriesQuery,
        response: { 200: DeliveryList, ...s2Errors },
      },
    },
    async (request) => deliveries.list(accountIdOf(request), request.query),
  );

  app.get(
    '/api/v1/distribution/deliveries/:id/attempts',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'listDeliveryAttempts',
        summary:
          "A delivery's attempts, newest first: time, outcome, the receiver's status and first 1 KiB of its answer (webhook) or the SMTP reply (email), duration",
        params: IdParams,
        querystring: PageQuery,
        response: { 200: MessageAttemptList, ...s2Errors },
      },
    },
    async (request) =>
      deliveries.attempts(
        accountIdOf(request),
        request.params.id,
        request.query.limit ?? 100,
        request.query.cursor,
      ),
  );

  app.post(
    '/api/v1/distribution/deliveries/:id/return',
    {
      // Every key is optional (interface): a return may send no body at all.
      config: { auth: { ...auth, role: 'member' as const }, bodyOptional: true },
      schema: {
        tags,
        operationId: 'returnDelivery',
        summary:
          'Return a delivered delivery within the deadline; with redistribute_on_return the record goes to another partner',
        params: IdParams,
        body: ReturnBody,
        response: { 200: ReturnResponse, ...s2Errors },
      },
    },
    async (request) =>
      deliveries.giveBack(accountIdOf(request), request.params.id, request.body, actorOf(callerOf(request))),
  );

  app.post(
    '/api/v1/distribution/participations/:id/test',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'testParticipation',
        summary:
          "Send an invented record to the participation's address over its channel, now; nothing is recorded",
        params: IdParams,
        response: { 200: ParticipationTestResult, ...s2Errors },
      },
    },
    // It takes no body (interface): one with anything in it is refused (app.ts, refuseAnyBody).
    async (request) => distribution.test(accountIdOf(request), request.params.id),
  );
};

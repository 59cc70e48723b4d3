import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../../http/auth.ts';
import { IdParams, PageQuery, s2Errors } from '../../http/schemas.ts';
import {
  CreateParticipationBody,
  CreateReturnReasonBody,
  DistributionSetup,
  DistributionSetupList,
  EntityKeyParams,
  ParticipationWithSecret,
  PutDistributionBody,
  PutRulesBody,
  ReturnReason,
  ReturnReasonList,
  RuleList,
  UpdateParticipationBody,
} from './setup.schemas.ts';
import type { SetupService } from './setup.service.ts';

const auth = {
  accept: ['api_key' as const],
  permission: 'settings' as const,
  module: 'distribution' as const,
};
const tags = ['Settings: distribution'];
/** Reading the return reasons is also for whoever may return deliveries (permission `distribution`). */
const returnsAuth = { ...auth, permission: 'distribution' as const };

/** Settings API of distributions (decisions §8): setups, participations, rules, return reasons. */
export const setupRoutes: FastifyPluginAsyncTypebox<{ setup: SetupService }> = async (app, { setup }) => {
  app.get(
    '/api/v1/settings/distributions',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'listDistributionSetups',
        summary: 'The distributions set up, oldest first, each with its entity key, participations and rules',
        querystring: PageQuery,
        response: { 200: DistributionSetupList, ...s2Errors },
      },
    },
    async (request) => setup.list(accountIdOf(request), request.query),
  );

  app.get(
    '/api/v1/settings/distributions/:entity_key',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'getDistributionSetup',
        summary: 'The distribution of one entity (404 when none is set up)',
        params: EntityKeyParams,
        response: { 200: DistributionSetup, ...s2Errors },
      },
    },
    async (request) => setup.get(accountIdOf(request), request.params.entity_key),
  );

  app.put(
    '/api/v1/settings/distributions/:entity_key',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'putDistributionSetup',
        summary: 'Set up the distribution of an entity, or change it',
        params: EntityKeyParams,
        body: PutDistributionBody,
        response: { 200: DistributionSetup, ...s2Errors },
      },
    },
    async (request) => setup.put(accountIdOf(request), request.params.entity_key, request.body),
  );

  app.post(
    '/api/v1/settings/distributions/:entity_key/participations',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'addParticipation',
        summary: 'Let a partner take part in a distribution; a webhook answers its signing secret once',
        params: EntityKeyParams,
        body: CreateParticipationBody,
        response: { 201: ParticipationWithSecret, ...s2Errors },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        .send(await setup.addParticipation(accountIdOf(request), request.params.entity_key, request.body)),
  );

  app.patch(
    '/api/v1/settings/participations/:id',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'updateParticipation',
        summary: 'Change a participation, or rotate its signing secret (the new one is shown once)',
        params: IdParams,
        body: UpdateParticipationBody,
        response: { 200: ParticipationWithSecret, ...s2Errors },
      },
    },
    async (request) => setup.updateParticipation(accountIdOf(request), request.params.id, request.body),
  );

  app.delete(
    '/api/v1/settings/participations/:id',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'deleteParticipation',
        summary:
          'Remove a participation that no rule names (else 409 conflict, reason used_by_rule, rule_ids); deliveries made keep their partner',
        params: IdParams,
        response: { 204: Type.Null(), ...s2Errors },
      },
    },
    async (request, reply) => {
      await setup.removeParticipation(accountIdOf(request), request.params.id);
      return reply.code(204).send(null);
    },
  );

  app.put(
    '/api/v1/settings/distributions/:entity_key/rules',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'putDistributionRules',
        summary: 'Replace the rules of a distribution; answers them in the order they are tried',
        params: EntityKeyParams,
        body: PutRulesBody,
        response: { 200: RuleList, ...s2Errors },
      },
    },
    async (request) => setup.putRules(accountIdOf(request), request.params.entity_key, request.body),
  );

  app.get(
    '/api/v1/settings/return-reasons',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'listReturnReasons',
        summary: 'The return reasons of the account, oldest first',
        querystring: PageQuery,
        response: { 200: ReturnReasonList, ...s2Errors },
      },
    },
    async (request) => setup.listReturnReasons(accountIdOf(request), request.query),
  );

  app.get(
    '/api/v1/distribution/return-reasons',
    {
      config: { auth: returnsAuth },
      schema: {
        tags: ['Distribution'],
        operationId: 'listReturnReasonsForReturns',
        summary:
          'The return reasons of the account, oldest first, for callers that return deliveries (permission distribution)',
        querystring: PageQuery,
        response: { 200: ReturnReasonList, ...s2Errors },
      },
    },
    async (request) => setup.listReturnReasons(accountIdOf(request), request.query),
  );

  app.post(
    '/api/v1/settings/return-reasons',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'createReturnReason',
        summary: 'Add a return reason',
        body: CreateReturnReasonBody,
        response: { 201: ReturnReason, ...s2Errors },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await setup.addReturnReason(accountIdOf(request), request.body)),
  );

  app.delete(
    '/api/v1/settings/return-reasons/:id',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'deleteReturnReason',
        summary: 'Delete a return reason; returns that named it keep their text and reporter',
        params: IdParams,
        response: { 204: Type.Null(), ...s2Errors },
      },
    },
    async (request, reply) => {
      await setup.removeReturnReason(accountIdOf(request), request.params.id);
      return reply.code(204).send(null);
    },
  );
};

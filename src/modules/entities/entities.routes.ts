import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { accountIdOf, credentialOf } from '../../http/auth.ts';
import { NoQuery, s1Errors, s2Errors } from '../../http/schemas.ts';
import {
  EntityKeyParams,
  PutEntityAnswer,
  PutEntityBody,
  S1EntityList,
  S2EntityList,
  SettingsEntity,
  SettingsEntityList,
} from './entities.schemas.ts';
import {
  type EntitiesService,
  presentEntityS1,
  presentEntityS2,
  presentEntitySettings,
} from './entities.service.ts';

const apiKey = { accept: ['api_key' as const] };
const settings = { accept: ['api_key' as const], permission: 'settings' as const };

export const entitiesRoutes: FastifyPluginAsyncTypebox<{ entities: EntitiesService }> = async (
  app,
  { entities },
) => {
  app.get(
    '/api/v1/entities',
    {
      config: { auth: apiKey },
      schema: {
        tags: ['Entities'],
        operationId: 'listEntities',
        summary: 'List entities with their fields, and the modules enabled for the account',
        querystring: NoQuery,
        response: { 200: S2EntityList, ...s2Errors },
      },
    },
    async (request) => {
      const credential = credentialOf(request);
      const list = await entities.all(credential.account.id);
      return { entities: list.map(presentEntityS2), modules: credential.account.modules };
    },
  );

  for (const path of ['/api/entities', '/api/lead-objects']) {
    app.get(
      path,
      {
        config: { auth: apiKey },
        schema: {
          tags: ['S1'],
          operationId: path === '/api/entities' ? 'listEntitiesS1' : 'listLeadObjectsS1',
          summary: path === '/api/entities' ? 'List entities and fields' : 'Alias of GET /api/entities',
          response: { 200: S1EntityList, ...s1Errors },
        },
      },
      async (request) =>
        (await entities.all(accountIdOf(request))).filter((e) => !e.archived).map(presentEntityS1),
    );
  }

  app.get(
    '/api/v1/settings/entities',
    {
      config: { auth: settings },
      schema: {
        tags: ['Settings: entities'],
        operationId: 'listEntityDefinitions',
        summary: 'List entity definitions with duplicate rules and pipelines',
        querystring: NoQuery,
        response: { 200: SettingsEntityList, ...s2Errors },
      },
    },
    async (request) => ({
      entities: (await entities.settings(accountIdOf(request))).map(presentEntitySettings),
    }),
  );

  app.get(
    '/api/v1/settings/entities/:key',
    {
      config: { auth: settings },
      schema: {
        tags: ['Settings: entities'],
        summary: 'Read an entity definition, with the state of its duplicate keys',
        params: EntityKeyParams,
        response: { 200: SettingsEntity, ...s2Errors },
      },
    },
    async (request) =>
      presentEntitySettings(await entities.settingsOf(accountIdOf(request), request.params.key)),
  );

  app.put(
    '/api/v1/settings/entities/:key',
    {
      config: { auth: settings },
      schema: {
        tags: ['Settings: entities'],
        operationId: 'putEntityDefinition',
        summary: 'Create or replace an entity definition',
        description:
          'Pipelines and stages left out are archived. A change that would leave an enabled automation naming a field, stage or pipeline the definition lacks (or `to` naming a field without the email format or role) answers 422 validation_failed, reason `used_by_automation`, a detail per problem keyed `automations.<id>.<member>`: change or remove the automation first. Leaving out a field that the filter of a distribution rule names, or a select option its `equals` or `in` names, answers the same with reason `used_by_rule`, keyed `distribution_rules.<id>.filter.<index>.field` (or `.value`, `.values.<j>`): change the rules first.',
        params: EntityKeyParams,
        body: PutEntityBody,
        response: { 200: PutEntityAnswer, ...s2Errors },
      },
    },
    async (request) => (await entities.put(accountIdOf(request), request.params.key, request.body)).entity,
  );
};

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { accountIdOf } from '../../http/auth.ts';
import { IdParams, s2Errors } from '../../http/schemas.ts';
import {
  CreatePartnerBody,
  MAX_PARTNERS_PER_PAGE,
  Partner,
  PartnerId,
  PartnerList,
  PartnerListQuery,
  RetiredPartner,
  UpdatePartnerBody,
} from './partners.schemas.ts';
import type { PartnersService } from './partners.service.ts';

const auth = {
  accept: ['api_key' as const],
  permission: 'distribution' as const,
  module: 'distribution' as const,
};
const tags = ['Distribution'];

/** Partners (interface: S2 distribution module). */
export const partnersRoutes: FastifyPluginAsyncTypebox<{ partners: PartnersService }> = async (
  app,
  { partners },
) => {
  app.get(
    '/api/v1/distribution/partners',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'listPartners',
        summary: 'Partners that are not retired, oldest first, optionally matching a search term',
        querystring: PartnerListQuery,
        response: { 200: PartnerList, ...s2Errors },
      },
    },
    async (request) =>
      partners.list(accountIdOf(request), {
        q: request.query.q,
        limit: request.query.limit ?? MAX_PARTNERS_PER_PAGE,
        cursor: request.query.cursor,
      }),
  );

  app.post(
    '/api/v1/distribution/partners',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'createPartner',
        summary: 'Add a partner',
        body: CreatePartnerBody,
        response: { 201: PartnerId, ...s2Errors },
      },
    },
    async (request, reply) => reply.code(201).send(await partners.create(accountIdOf(request), request.body)),
  );

  app.get(
    '/api/v1/distribution/partners/:id',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'getPartner',
        summary: 'One partner, retired or not, with what its invoices still miss',
        params: IdParams,
        response: { 200: Partner, ...s2Errors },
      },
    },
    async (request) => partners.get(accountIdOf(request), request.params.id),
  );

  app.patch(
    '/api/v1/distribution/partners/:id',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'updatePartner',
        summary: 'Change a partner; a missing key stays as it is',
        params: IdParams,
        body: UpdatePartnerBody,
        response: { 200: PartnerId, ...s2Errors },
      },
    },
    async (request) => partners.update(accountIdOf(request), request.params.id, request.body),
  );

  app.delete(
    '/api/v1/distribution/partners/:id',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'retirePartner',
        summary:
          'Retire a partner: left out of listings and selections, kept in existing deliveries (PATCH retired:false brings it back)',
        params: IdParams,
        response: { 200: RetiredPartner, ...s2Errors },
      },
    },
    async (request) => partners.retire(accountIdOf(request), request.params.id),
  );
};

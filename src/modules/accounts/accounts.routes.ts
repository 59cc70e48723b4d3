import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { IdParams, PageQuery, s2Errors } from '../../http/schemas.ts';
import { CreatedApiKey } from '../api-keys/api-keys.schemas.ts';
import {
  Account,
  AccountList,
  CreateAccountBody,
  CreateAccountKeyBody,
  CreatedAccount,
  UpdateAccountBody,
} from './accounts.schemas.ts';
import type { AccountsService } from './accounts.service.ts';

const auth = { accept: ['admin' as const] };
const tags = ['Operator'];

/** Operator API (decisions §2), authenticated with the instance's admin token. */
export const accountsRoutes: FastifyPluginAsyncTypebox<{ accounts: AccountsService }> = async (
  app,
  { accounts },
) => {
  app.post(
    '/admin/v1/accounts',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'createAccount',
        summary: 'Create an account and its first API key',
        body: CreateAccountBody,
        response: { 201: CreatedAccount, ...s2Errors },
      },
    },
    async (request, reply) => reply.code(201).send(await accounts.create(request.body)),
  );

  app.get(
    '/admin/v1/accounts',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'listAccounts',
        summary: 'List accounts',
        querystring: PageQuery,
        response: { 200: AccountList, ...s2Errors },
      },
    },
    async (request) => accounts.list(request.query.limit ?? 100, request.query.cursor),
  );

  app.get(
    '/admin/v1/accounts/:id',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'getAccount',
        summary: 'Read an account',
        params: IdParams,
        response: { 200: Account, ...s2Errors },
      },
    },
    async (request) => accounts.get(request.params.id),
  );

  app.patch(
    '/admin/v1/accounts/:id',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'updateAccount',
        summary: 'Change name, modules or rate limit',
        params: IdParams,
        body: UpdateAccountBody,
        response: { 200: Account, ...s2Errors },
      },
    },
    async (request) => accounts.update(request.params.id, request.body),
  );

  app.post(
    '/admin/v1/accounts/:id/api-keys',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'createAccountApiKey',
        summary: 'Issue an API key to an account (its value is shown only in this answer)',
        params: IdParams,
        body: CreateAccountKeyBody,
        response: { 201: CreatedApiKey, ...s2Errors },
      },
    },
    async (request, reply) => reply.code(201).send(await accounts.createKey(request.params.id, request.body)),
  );
};

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../../http/auth.ts';
import { NextCursor, PageQuery, s2Errors, Timestamp, Uuid } from '../../http/schemas.ts';
import type { UsersService } from './users.service.ts';

const auth = { accept: ['api_key' as const], permission: 'settings' as const };
const tags = ['Settings: users'];
const User = Type.Object({ id: Uuid, email: Type.String(), name: Type.String(), created_at: Timestamp });

export const usersRoutes: FastifyPluginAsyncTypebox<{ users: UsersService }> = async (app, { users }) => {
  app.post(
    '/api/v1/settings/users',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'createUser',
        summary: 'Add a user (assignee or viewer of leads)',
        body: Type.Object(
          {
            email: Type.String({ format: 'email', maxLength: 254 }),
            name: Type.String({ minLength: 1, maxLength: 200 }),
          },
          { additionalProperties: false },
        ),
        response: { 201: User, ...s2Errors },
      },
    },
    async (request, reply) => reply.code(201).send(await users.create(accountIdOf(request), request.body)),
  );

  app.get(
    '/api/v1/settings/users',
    {
      config: { auth },
      schema: {
        tags,
        operationId: 'listUsers',
        summary: 'List users',
        querystring: PageQuery,
        response: { 200: Type.Object({ users: Type.Array(User), next_cursor: NextCursor }), ...s2Errors },
      },
    },
    async (request) => users.list(accountIdOf(request), request.query.limit ?? 100, request.query.cursor),
  );
};

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Role as RoleName } from '../../db/types.ts';
import { accountIdOf, ROLES } from '../../http/auth.ts';
import { IdParams, Name, NextCursor, PageQuery, s2Errors, Timestamp, Uuid } from '../../http/schemas.ts';
import type { Language } from '../people/sign-in.texts.ts';
import { MAX_USERS, type UsersService } from './users.service.ts';

/** Users and roles are the owner's (decisions §14); an API key needs `settings` and `manages_users`. */
const ownerOnly = {
  accept: ['api_key' as const],
  permission: 'settings' as const,
  role: 'owner' as const,
  usersManagement: true,
};
/** Every signed-in person may see who the account's people are (assignees, viewers). */
const list = { accept: ['api_key' as const], permission: 'settings' as const, role: 'viewer' as const };
const tags = ['Settings: users'];
const Role = Type.String({
  enum: [...ROLES],
  description:
    '`owner`: everything, users and roles; `admin`: also the settings API; `member`: records, notes, stage moves, returns; `viewer`: reads only',
});
const User = Type.Object({
  id: Uuid,
  email: Type.String(),
  name: Type.String(),
  role: Role,
  created_at: Timestamp,
});
const CreatedUser = Type.Object({
  ...User.properties,
  invited_until: Type.Optional({
    ...Timestamp,
    description: 'With `invite`: until when the emailed sign-in link works (7 days)',
  }),
});

export const usersRoutes: FastifyPluginAsyncTypebox<{ users: UsersService }> = async (app, { users }) => {
  app.post(
    '/api/v1/settings/users',
    {
      config: { auth: ownerOnly },
      schema: {
        tags,
        operationId: 'createUser',
        summary: 'Add a user (a person who signs in; an assignee or viewer of leads); the first is the owner',
        description: `At most ${MAX_USERS} users per account: one more answers 422 validation_failed, reason \`too_many\`, keyed \`email\`.`,
        body: Type.Object(
          {
            email: Type.String({ format: 'email', maxLength: 254 }),
            name: Name(200),
            role: Type.Optional({ ...Role, default: 'member' }),
            invite: Type.Optional(
              Type.Boolean({
                description:
                  'Email the person an invitation: a one-time sign-in link valid 7 days (through the outbound engine, like sign-in links); after signing in they can choose a password. Default false',
              }),
            ),
            language: Type.Optional(
              Type.String({
                enum: ['en', 'de'],
                description:
                  "The invitation's language (default `en`); only with `invite: true`, else 422 `not_allowed`",
              }),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 201: CreatedUser, ...s2Errors },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        // The schema's enum is ROLES.
        .send(
          await users.create(accountIdOf(request), {
            email: request.body.email,
            name: request.body.name,
            role: request.body.role as RoleName,
            invite: request.body.invite,
            // The schema's enum is the invitation's languages.
            language: request.body.language as Language | undefined,
          }),
        ),
  );

  app.get(
    '/api/v1/settings/users',
    {
      config: { auth: list },
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

  app.get(
    '/api/v1/settings/users/:id',
    {
      config: { auth: list },
      schema: {
        tags,
        operationId: 'getUser',
        summary: 'Read a user',
        params: IdParams,
        response: { 200: User, ...s2Errors },
      },
    },
    async (request) => users.get(accountIdOf(request), request.params.id),
  );

  app.patch(
    '/api/v1/settings/users/:id',
    {
      config: { auth: ownerOnly },
      schema: {
        tags,
        operationId: 'updateUser',
        summary:
          'Rename a user or change their role; a new role ends their sessions at once. Demoting the last owner answers 409 last_owner',
        params: IdParams,
        body: Type.Object(
          { name: Type.Optional(Name(200)), role: Type.Optional(Role) },
          { additionalProperties: false },
        ),
        response: { 200: User, ...s2Errors },
      },
    },
    async (request) =>
      users.update(accountIdOf(request), request.params.id, {
        ...request.body,
        role: request.body.role as RoleName | undefined,
      }),
  );

  app.delete(
    '/api/v1/settings/users/:id',
    {
      config: { auth: ownerOnly },
      schema: {
        tags,
        operationId: 'deleteUser',
        summary:
          'Remove a user: their sessions end at once, and they leave the records they were assignee or viewer of. Removing the last owner answers 409 last_owner',
        params: IdParams,
        response: { 204: Type.Null(), ...s2Errors },
      },
    },
    async (request, reply) => {
      await users.remove(accountIdOf(request), request.params.id);
      return reply.code(204).send(null);
    },
  );
};

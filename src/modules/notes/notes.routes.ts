import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { apiKeyOf } from '../../http/auth.ts';
import { s2Errors } from '../../http/schemas.ts';
import { NoteBody, NoteOut } from './notes.schemas.ts';
import type { NotesService } from './notes.service.ts';

export const notesRoutes: FastifyPluginAsyncTypebox<{ notes: NotesService }> = async (app, { notes }) => {
  app.post(
    '/api/v1/notes',
    {
      config: { auth: { accept: ['api_key'], permission: 'notes:write' } },
      schema: {
        tags: ['Notes'],
        summary: 'Add a note to an existing record, found by id or by email; never creates a record',
        body: NoteBody,
        headers: Type.Object({ 'idempotency-key': Type.Optional(Type.String({ maxLength: 255 })) }),
        response: { 200: NoteOut, 201: NoteOut, ...s2Errors },
      },
    },
    async (request, reply) => {
      const credential = apiKeyOf(request);
      const header = request.headers['idempotency-key'];
      const { note, replayed } = await notes.add(
        { accountId: credential.account.id, keyName: credential.keyName, requestId: request.id },
        {
          body: request.body.body,
          record: request.body.record,
          email: request.body.email,
          entity: request.body.entity,
          kind: request.body.kind,
          idempotencyKey:
            request.body.idempotency_key ??
            (typeof header === 'string' && header !== '' ? header : undefined),
        },
      );
      if (replayed) reply.header('idempotent-replayed', 'true');
      return reply.code(replayed ? 200 : 201).send(note);
    },
  );
};

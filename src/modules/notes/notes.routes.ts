import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { actorOf, callerOf, keyOf, senderNameOf } from '../../http/auth.ts';
import { IdempotencyHeaders, s2Errors } from '../../http/schemas.ts';
import { AmbiguousMatch, NoteBody, NoteOut } from './notes.schemas.ts';
import type { NoteInput, NotesService } from './notes.service.ts';

export const notesRoutes: FastifyPluginAsyncTypebox<{ notes: NotesService }> = async (app, { notes }) => {
  app.post(
    '/api/v1/notes',
    {
      // The note's statement checks a key taken from memory (one round trip).
      config: { auth: { accept: ['api_key'], permission: 'notes:write', rememberedKey: true } },
      schema: {
        tags: ['Notes'],
        operationId: 'createNote',
        summary: 'Add a note to an existing record, found by id or by email; never creates a record',
        body: NoteBody,
        headers: IdempotencyHeaders,
        response: { 200: NoteOut, 201: NoteOut, 409: AmbiguousMatch, ...s2Errors },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      const header = request.headers['idempotency-key'];
      const { note, replayed } = await notes.add(
        {
          accountId: caller.account.id,
          keyName: senderNameOf(caller),
          requestId: request.id,
          key: keyOf(caller),
          actor: actorOf(caller),
        },
        {
          body: request.body.body,
          record: request.body.record,
          email: request.body.email,
          entity: request.body.entity,
          // The schema's enum is NOTE_KINDS.
          kind: request.body.kind as NoteInput['kind'],
          idempotencyKey: request.body.idempotency_key ?? (typeof header === 'string' ? header : undefined),
        },
      );
      if (replayed) reply.header('idempotent-replayed', 'true');
      return reply.code(replayed ? 200 : 201).send(note);
    },
  );
};

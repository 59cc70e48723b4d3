import { Type } from 'typebox';
import { Timestamp, Uuid, Warning } from '../../http/schemas.ts';
import { NOTE_KINDS } from './notes.service.ts';

export const NoteBody = Type.Object(
  {
    body: Type.String({ minLength: 1, maxLength: 10_000 }),
    record: Type.Optional(Uuid),
    email: Type.Optional(Type.String({ minLength: 3, maxLength: 254 })),
    entity: Type.Optional(Type.String({ maxLength: 100 })),
    kind: Type.Optional(Type.Union(NOTE_KINDS.map((kind) => Type.Literal(kind)))),
    idempotency_key: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
  },
  { additionalProperties: false },
);

export const NoteOut = Type.Object({
  id: Uuid,
  record_id: Uuid,
  kind: Type.String(),
  created_at: Timestamp,
  warnings: Type.Array(Warning),
});

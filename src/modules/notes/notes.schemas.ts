import { Type } from 'typebox';
import { IdempotencyKey, Timestamp, Uuid, Warning } from '../../http/schemas.ts';
import { NOTE_KINDS } from './notes.service.ts';

export const NoteBody = Type.Object(
  {
    body: Type.String({ minLength: 1, maxLength: 10_000 }),
    record: Type.Optional(Uuid),
    email: Type.Optional(Type.String({ minLength: 3, maxLength: 254 })),
    entity: Type.Optional(Type.String({ maxLength: 100 })),
    kind: Type.Optional(Type.String({ enum: [...NOTE_KINDS], description: 'general when not given' })),
    idempotency_key: Type.Optional(IdempotencyKey),
  },
  {
    additionalProperties: false,
    // The record is found by id or by email: one of the two is needed (record wins when both).
    anyOf: [{ required: ['record'] }, { required: ['email'] }],
  },
);

export const NoteOut = Type.Object({
  id: Uuid,
  record_id: Uuid,
  kind: Type.String({ enum: [...NOTE_KINDS] }),
  created_at: Timestamp,
  warnings: Type.Array(Warning),
});

/** 409 `ambiguous_match`: several records carry the email; their ids (at most 20). */
export const AmbiguousMatch = Type.Object(
  {
    error: Type.Literal('ambiguous_match'),
    ids: Type.Array(Uuid, { maxItems: 20 }),
  },
  { additionalProperties: true },
);

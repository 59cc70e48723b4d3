import { Type } from 'typebox';
import { IdempotencyKey, NAME_PATTERN, Timestamp, Uuid, Warning } from '../../http/schemas.ts';
import { NOTE_KINDS } from './notes.service.ts';

export const NoteBody = Type.Object(
  {
    body: Type.String({
      // No minLength: the pattern refuses "" too, so an empty text reads `required` as a blank one does.
      maxLength: 10_000,
      pattern: NAME_PATTERN,
      description:
        'The note’s text, at most 10,000 characters; empty or blanks only answers 422 (reason required)',
    }),
    record: Type.Optional(
      Type.String({
        format: 'uuid',
        description:
          'The record’s id; give either this or email (both answer 422, key email, reason not_allowed). With entity, a record of another entity is no match (404 record_not_found)',
      }),
    ),
    email: Type.Optional(
      Type.String({
        minLength: 3,
        maxLength: 254,
        description:
          'Looked up case-insensitively in the field with the email role; give either this or record (both answer 422, reason not_allowed)',
      }),
    ),
    entity: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description:
          'The key of the entity the record is looked for in (by email or id); empty answers 422, an unknown one 404 unknown_entity',
      }),
    ),
    kind: Type.Optional(Type.String({ enum: [...NOTE_KINDS], description: 'general when not given' })),
    // null is no key, as `meta.idempotency_key: null` is on intake (decisions §4).
    idempotency_key: Type.Optional(
      Type.Union([IdempotencyKey, Type.Null()], {
        description:
          '1–255 printable characters, spaces included, compared exactly; another value (the empty one too) answers 400 invalid_idempotency_key; null is no key (the Idempotency-Key header then applies)',
      }),
    ),
  },
  {
    additionalProperties: false,
    // The record is found by id or by email: one of the two is needed, not both (the service says so).
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

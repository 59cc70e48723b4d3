import { Type } from 'typebox';
import { NextCursor, Timestamp, Uuid, Warning } from '../../http/schemas.ts';

const ShortText = Type.String({ maxLength: 200 });

/** POST /api/v1/records body: known nodes typed, every other top-level key is a field name (rule 1). */
export const S2RecordBody = Type.Object(
  {
    entity: Type.String({ minLength: 1, maxLength: 100 }),
    fields: Type.Optional(
      Type.Record(Type.String({ maxLength: 100 }), Type.Unknown(), { maxProperties: 500 }),
    ),
    note: Type.Optional(Type.String({ maxLength: 10_000 })),
    documents: Type.Optional(
      Type.Array(
        Type.Object({
          url: Type.String({ minLength: 1, maxLength: 2048 }),
          name: Type.Optional(Type.String({ maxLength: 200 })),
          field: Type.Optional(Type.String({ maxLength: 100 })),
        }),
        { maxItems: 20 },
      ),
    ),
    crm: Type.Optional(
      Type.Object({
        stage: Type.String({ minLength: 1, maxLength: 100 }),
        pipeline: Type.Optional(Type.String({ maxLength: 100 })),
      }),
    ),
    booking: Type.Optional(
      Type.Object({
        title: Type.Optional(ShortText),
        duration_minutes: Type.Optional(Type.Integer({ minimum: 5, maximum: 1440 })),
        starts_at: Type.Optional(Type.String({ maxLength: 64 })),
      }),
    ),
    distribution: Type.Optional(
      Type.Object({ partner_ids: Type.Optional(Type.Array(Uuid, { maxItems: 100 })) }),
    ),
    meta: Type.Optional(Type.Record(Type.String({ maxLength: 100 }), Type.Unknown(), { maxProperties: 50 })),
  },
  { additionalProperties: true, maxProperties: 600 },
);

export const IntakeResponse = Type.Object({
  id: Uuid,
  entity: Type.String(),
  created: Type.Boolean(),
  updated: Type.Boolean(),
  warnings: Type.Array(Warning),
});

export const BulkBody = Type.Object(
  { records: Type.Array(Type.Object({}, { additionalProperties: true }), { minItems: 1, maxItems: 100 }) },
  { additionalProperties: false },
);

export const BulkResponse = Type.Object({
  accepted: Type.Integer(),
  rejected: Type.Integer(),
  results: Type.Array(
    Type.Union([
      IntakeResponse,
      Type.Object(
        {
          error: Type.String(),
          details: Type.Optional(
            Type.Array(Type.Object({ key: Type.String(), reason: Type.String(), message: Type.String() })),
          ),
        },
        { additionalProperties: true },
      ),
    ]),
  ),
});

export const S1IntakeBody = Type.Record(Type.String({ maxLength: 200 }), Type.Unknown(), {
  maxProperties: 600,
});

export const S1IntakeResponse = Type.Object({
  status: Type.Literal('success'),
  lead_id: Uuid,
  created_at: Timestamp,
});

export const S1BulkBody = Type.Object(
  {
    entity: Type.String({ minLength: 1, maxLength: 100 }),
    batch: Type.Array(Type.Record(Type.String({ maxLength: 200 }), Type.Unknown(), { maxProperties: 600 }), {
      minItems: 1,
      maxItems: 1000,
    }),
    source: Type.Optional(Type.String({ maxLength: 100 })),
    note: Type.Optional(Type.String({ maxLength: 10_000 })),
  },
  { additionalProperties: false },
);

export const S1BulkResponse = Type.Object({
  status: Type.Literal('success'),
  created: Type.Array(Type.Object({ lead_id: Uuid, email: Type.Union([Type.String(), Type.Null()]) })),
});

export const IntakeLogList = Type.Object({
  entries: Type.Array(
    Type.Object({
      id: Uuid,
      request_id: Type.String(),
      endpoint: Type.String(),
      outcome: Type.String(),
      status_code: Type.Integer(),
      record_id: Type.Union([Uuid, Type.Null()]),
      entity: Type.Union([Type.String(), Type.Null()]),
      source: Type.Union([Type.String(), Type.Null()]),
      warnings: Type.Array(
        Type.Object({ key: Type.String(), reason: Type.String() }, { additionalProperties: true }),
      ),
      error: Type.Union([Type.String(), Type.Null()]),
      created_at: Timestamp,
    }),
  ),
  next_cursor: NextCursor,
});

import { Type } from 'typebox';
import {
  Cursor,
  FieldValues,
  NextCursor,
  QueryDateOrTimestamp,
  QueryTimestamp,
  Timestamp,
  Uuid,
  Warning,
} from '../../http/schemas.ts';
import { KEY_PATTERN } from '../entities/entities.schemas.ts';

export const DocumentOut = Type.Object({
  id: Uuid,
  name: Type.String(),
  mime: Type.String(),
  size: Type.Integer(),
  field: Type.Optional(Type.String()),
  url: Type.String(),
});

export const RecordOut = Type.Object({
  id: Uuid,
  entity: Type.String(),
  name: Type.String(),
  fields: Type.Record(Type.String(), Type.Unknown()),
  source: Type.String(),
  external_id: Type.Union([Type.String(), Type.Null()]),
  origin: Type.Record(Type.String(), Type.String()),
  documents: Type.Array(DocumentOut),
  created_at: Timestamp,
  updated_at: Timestamp,
  crm: Type.Union([
    Type.Object({ pipeline: Type.String(), stage: Type.String(), entered_at: Timestamp }),
    Type.Null(),
  ]),
});

export const HistoryQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
);

export const RecordHistory = Type.Object({
  events: Type.Array(
    Type.Object({
      id: Uuid,
      type: Type.String(),
      message: Type.String(),
      data: Type.Record(Type.String(), Type.Unknown()),
      actor: Type.Object({
        type: Type.String({ enum: ['api_key', 'user', 'source', 'record_token', 'automation', 'system'] }),
        name: Type.String(),
      }),
      created_at: Timestamp,
    }),
  ),
  stages: Type.Array(
    Type.Object({
      pipeline: Type.String(),
      stage: Type.String(),
      entered_at: Timestamp,
      left_at: Type.Union([Timestamp, Type.Null()]),
      seconds: Type.Integer({ minimum: 0, description: 'time in the stage; up to now for the current stay' }),
    }),
    { description: 'stays in stages, newest first (on the first page only)' },
  ),
  next_cursor: NextCursor,
});

export const RecordList = Type.Object({ records: Type.Array(RecordOut), next_cursor: NextCursor });

export const RECORD_ORDERS = ['updated', 'newest'] as const;

export const RecordListQuery = Type.Object(
  {
    entity: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description:
          'records of the entity with this key; empty answers 422 as every empty filter does, an unknown key 404 unknown_entity',
      }),
    ),
    updated_since: Type.Optional(
      QueryTimestamp('records updated at or after this ISO 8601 timestamp with offset'),
    ),
    stage: Type.Optional(
      Type.String({ minLength: 1, maxLength: 100, description: 'records in the stage of this name (CRM)' }),
    ),
    pipeline: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description: 'records in the pipeline of this name (CRM)',
      }),
    ),
    source: Type.Optional(
      Type.String({ minLength: 1, maxLength: 200, description: 'records whose origin source has this name' }),
    ),
    created_from: Type.Optional(
      QueryDateOrTimestamp('created at or after; a date (YYYY-MM-DD) starts at 00:00 UTC'),
    ),
    created_to: Type.Optional(
      QueryDateOrTimestamp('created at or before; a date (YYYY-MM-DD) includes that whole day (UTC)'),
    ),
    q: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: 'text contained in the name or the email address, any case',
      }),
    ),
    order: Type.Optional(
      Type.String({
        enum: [...RECORD_ORDERS],
        default: 'updated',
        description:
          '`updated`: oldest change first (for polling with updated_since); `newest`: newest creation first (for screens)',
      }),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
);

/**
 * A document a record body names by URL (POST and PATCH of records, intake). A key other than
 * these (a misspelt `field`, which puts the file in the record's pool instead of its field) is an
 * `unmapped` warning keyed `documents.<index>.<key>`, refused under a strict key.
 */
export const DocumentRef = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: 2048 }),
    name: Type.Optional(Type.String({ maxLength: 200 })),
    field: Type.Optional(
      Type.String({ maxLength: 100, description: 'Key of a `file` or `files` field of the entity' }),
    ),
  },
  {
    additionalProperties: true,
    maxProperties: 20,
    propertyNames: { maxLength: 100 },
    description:
      'A document to fetch; a key other than url, name and field is the warning {key: documents.<index>.<key>, reason: unmapped}, refused under a strict key',
  },
);

export const PatchRecordBody = Type.Object(
  {
    fields: Type.Optional(FieldValues(100)),
    documents: Type.Optional(Type.Array(DocumentRef, { maxItems: 20 })),
  },
  { additionalProperties: false },
);

export const PatchRecordResponse = Type.Object({
  id: Uuid,
  entity: Type.String(),
  updated: Type.Boolean(),
  fields: Type.Array(Type.String()),
  documents: Type.Integer(),
  warnings: Type.Array(Warning),
});

export const IssueTokenBody = Type.Object(
  {
    fields: Type.Array(
      Type.String({ pattern: KEY_PATTERN, description: 'a field key of the record’s entity' }),
      { minItems: 1, maxItems: 300, description: 'Keys of fields of the record’s entity' },
    ),
    expires_in_days: Type.Optional(Type.Integer({ minimum: 1, maximum: 30 })),
  },
  { additionalProperties: false },
);

export const IssuedToken = Type.Object({ token: Type.String(), expires_at: Timestamp });

export const S1Lead = Type.Object({
  lead_id: Uuid,
  entity: Uuid,
  status_step: Type.Union([Type.String(), Type.Null()]),
  fields: Type.Record(Type.String(), Type.Unknown()),
  events: Type.Array(Type.Object({ type: Type.String(), message: Type.String(), created_at: Type.String() })),
});

export const S1PatchBody = Type.Object(
  {
    fields: FieldValues(200),
    note: Type.Optional(Type.String({ maxLength: 10_000 })),
  },
  { additionalProperties: false },
);

export const S1PatchResponse = Type.Object({
  status: Type.Literal('success'),
  lead_id: Uuid,
  updated_fields: Type.Array(Type.String()),
  warnings: Type.Optional(
    Type.Array(Warning, {
      description:
        'Present when something sent was not acted on: a name in fields that matches no field (unmapped), or a blank note, which added nothing (key note, reason blank)',
    }),
  ),
});

import { Type } from 'typebox';
import {
  Cursor,
  FieldValues,
  IdempotencyKey,
  NAME_PATTERN,
  NextCursor,
  QueryDateOrTimestamp,
  Timestamp,
  Uuid,
  Warning,
} from '../../http/schemas.ts';
import {
  SourceTokenDistributionAnswer,
  StartDistributionResponse,
} from '../distribution/distribution.schemas.ts';
import { DocumentRef } from '../records/records.schemas.ts';
import { ORIGIN_KEYS } from './intake.handover.ts';

const ShortText = Type.String({ maxLength: 200 });

/**
 * The options of an intake node's object: keys it does not take are warnings
 * `{key: "<node>.<key>", reason: unmapped}` (refused under a strict key), as unknown `meta` keys
 * are, never dropped without a word; bounded in number and length as `meta` is.
 */
function openNode(node: string) {
  return {
    additionalProperties: true,
    maxProperties: 20,
    propertyNames: { maxLength: 100 },
    description: `Other keys are the warning {key: ${node}.<key>, reason: unmapped}, refused under a strict key`,
  };
}

/** Text of `meta` (decisions §4); null or empty means "not given". */
function metaText(maxLength: number, description: string) {
  return Type.Optional(Type.Union([Type.String({ maxLength }), Type.Null()], { description }));
}

/** The `booking` node (booking module; interface: POST /api/v1/records rules 2 and 3). */
const BookingNode = Type.Object(
  {
    title: Type.Optional(ShortText),
    duration_minutes: Type.Optional(
      Type.Integer({
        minimum: 5,
        maximum: 1440,
        description: 'Length of the appointment; the calendar’s slot length by default and at most',
      }),
    ),
    // Any JSON value: the record is created in every case (interface, rule 3), so a value that is
    // no readable time, whatever its type, is the invalid_starts_at warning rather than a 422.
    starts_at: Type.Optional(
      Type.Unknown({
        description:
          'ISO 8601 time with an offset of a free slot (text); without it, or null, a booking link is made. A taken slot is a slot_taken warning; anything else that is not such a time (other text, a number, an object) an invalid_starts_at warning; with a link in each case',
      }),
    ),
    calendar_id: Type.Optional(
      Type.String({ format: 'uuid', description: 'The account’s default calendar when not given' }),
    ),
  },
  openNode('booking'),
);

const BookingAnswer = Type.Union([
  Type.Object({ token: Type.String(), url: Type.String(), expires_at: Timestamp }),
  Type.Object({ appointment_id: Uuid, starts_at: Timestamp }),
]);

/** Facts about the submission (interface: POST /api/v1/records `meta`); other keys are `unmapped` warnings. */
export const IntakeMeta = Type.Object(
  {
    source: metaText(100, 'Stored as the record source'),
    idempotency_key: Type.Optional(Type.Union([IdempotencyKey, Type.Null()])),
    external_id: metaText(255, 'The sender’s id of the lead; a match updates that record'),
    ...Object.fromEntries(ORIGIN_KEYS.map((key) => [key, metaText(2000, 'Origin of the submission')])),
  },
  { additionalProperties: true, maxProperties: 50, propertyNames: { maxLength: 100 } },
);

/** POST /api/v1/records body: known nodes typed, every other top-level key is a field name (rule 1). */
const DISTRIBUTION_NODE = {
  ...openNode('distribution'),
  description:
    'Distributes the new record in the same call (distribution module); the answer carries `distribution` shaped like the start answer, or the warning no_distribution when its entity has no enabled distribution',
};

const S2_RECORD_BODY = {
  additionalProperties: true,
  maxProperties: 600,
  propertyNames: { maxLength: 100 },
  description:
    'Known keys as listed; every other top-level key is a field name (its value is read for the field type, e.g. "42" for a number).',
};

/** Why the source-token door refuses `distribution.partner_ids`. */
const SOURCE_TOKEN_PARTNER_IDS = 'a source token cannot choose partners';

export const S2RecordBody = Type.Object(
  {
    entity: Type.String({ minLength: 1, maxLength: 100 }),
    fields: Type.Optional({
      ...FieldValues(100),
      description:
        'Values under their field names. Required unless values come as top-level keys (rule 1): a body with neither answers 422 validation_failed, reason `required`',
    }),
    note: Type.Optional(Type.String({ maxLength: 10_000 })),
    documents: Type.Optional(Type.Array(DocumentRef, { maxItems: 20 })),
    crm: Type.Optional(
      Type.Object(
        {
          stage: Type.String({ minLength: 1, maxLength: 100, description: 'A stage of the pipeline' }),
          pipeline: Type.Optional(
            Type.String({
              maxLength: 100,
              description:
                'A pipeline of the entity; needed only when the entity has several (else 422 pipeline_required)',
            }),
          ),
        },
        {
          ...openNode('crm'),
          description:
            'The stage a new record enters (CRM module); an unknown stage or pipeline answers 422. A key other than stage and pipeline is the warning {key: crm.<key>, reason: unmapped} (refused under a strict key). A handover that updates or matches a stored record does not move it: a stage other than its own gives the warning {key: crm, reason: existing_record} (stage moves go through POST /api/v1/crm/records/{id}/stage)',
        },
      ),
    ),
    booking: Type.Optional(BookingNode),
    distribution: Type.Optional(
      Type.Object(
        {
          partner_ids: Type.Optional(
            Type.Array(Uuid, {
              minItems: 1,
              maxItems: 100,
              description:
                'only these partners may be chosen (not through a source token); an id naming no partner of the account gives the warning unknown_partner; an empty list answers 422 (leave the key out for no limit)',
            }),
          ),
        },
        DISTRIBUTION_NODE,
      ),
    ),
    meta: Type.Optional(IntakeMeta),
  },
  S2_RECORD_BODY,
);

/**
 * The JSON body of the source-token door: a public form cannot choose who buys its lead, so the
 * distribution node takes no `partner_ids` (docs/decisions.md, Distribution runs).
 */
export const SourceTokenRecordBody = Type.Object(
  {
    ...S2RecordBody.properties,
    distribution: Type.Optional(
      Type.Object(
        {
          partner_ids: Type.Optional(
            Type.Never({
              description: `${SOURCE_TOKEN_PARTNER_IDS} (422 not_allowed): the distribution's rules choose; send "distribution": {}`,
            }),
          ),
        },
        DISTRIBUTION_NODE,
      ),
    ),
  },
  S2_RECORD_BODY,
);

/** Text of a `meta[key]` form part, as `metaText` is in JSON. */
function metaFormText(maxLength: number, description: string) {
  return Type.Optional(Type.String({ maxLength, description }));
}

/**
 * POST /api/v1/in/{token} as an HTML form posts it (decisions §13): flat text. `meta[key]` and
 * `fields[key]` fill those objects; every other name but `entity` and `note` is a field name
 * (rule 1); the other nested nodes have no form spelling.
 */
const FORM_DESCRIPTION =
  'Every name but entity, note and meta[…] is a field name; fields[key] names a field too (e.g. fields[email]); meta[key] is a key of meta, others than those listed are unmapped warnings; a repeated name gives several values. A name, or the key in fields[…] or meta[…], has at most 100 characters, as in JSON (else 422, reason out_of_range, the name as the key). The source’s trap field (honeypot_field, default _hp) is not a field: filled, the post is answered as received and nothing is stored.';

export const S2RecordForm = Type.Object(
  {
    entity: Type.String({ minLength: 1, maxLength: 100 }),
    note: Type.Optional(Type.String({ maxLength: 10_000 })),
    'meta[source]': metaFormText(100, 'Stored as the record source'),
    'meta[idempotency_key]': Type.Optional(
      Type.Union([IdempotencyKey, Type.Literal('')], {
        description:
          'The idempotency key, 1–255 printable characters (else 400 invalid_idempotency_key); left empty (a hidden input not filled), no key: a form has no null',
      }),
    ),
    'meta[external_id]': metaFormText(255, 'The sender’s id of the lead; a match updates that record'),
    ...Object.fromEntries(
      ORIGIN_KEYS.map((key) => [`meta[${key}]`, metaFormText(2000, 'Origin of the submission')]),
    ),
    ...Object.fromEntries(
      ['fields', 'meta'].map((key) => [
        key,
        Type.Optional(
          Type.Never({
            description: `not taken bare: ${key}[name]=… gives its keys (a bare ${key} answers 422 invalid_type)`,
          }),
        ),
      ]),
    ),
    ...Object.fromEntries(
      ['documents', 'crm', 'booking', 'distribution'].map((key) => [
        key,
        Type.Optional(Type.Never({ description: 'not taken from a form (422 not_allowed): send JSON' })),
      ]),
    ),
  },
  {
    additionalProperties: Type.Union([
      Type.String({ maxLength: 100_000 }),
      Type.Array(Type.String({ maxLength: 100_000 }), { maxItems: 100 }),
    ]),
    maxProperties: 600,
    description: FORM_DESCRIPTION,
  },
);

/** The same form as multipart: its file parts are read and dropped, each an `inline_file` warning. */
const S2RecordMultipart = {
  ...S2RecordForm,
  description: `${FORM_DESCRIPTION} File parts are never taken (documents go by URL): each is read and dropped (at most 20, 25 MiB each, else 413) with the warning {key: part name, reason: inline_file}, its name bound as any other; the other parts count against the 1 MiB body limit.`,
};

/** The encodings of POST /api/v1/in/{token} (decisions §13), each with its own schema. */
export const SourceTokenBody = {
  content: {
    'application/json': { schema: SourceTokenRecordBody },
    'application/x-www-form-urlencoded': { schema: S2RecordForm },
    'multipart/form-data': { schema: S2RecordMultipart },
  },
};

/** What the source-token door adds for website forms (decisions §13). */
export const SOURCE_TOKEN_INTAKE = [
  'Same handler, body, rules and JSON answers as POST /api/v1/records; the source token is the credential.',
  'The token only creates records: under an update duplicate rule a post with a stored record’s values becomes a new record linked to it (warning duplicate), and a meta.external_id naming a stored record answers 409 conflict (reason external_id).',
  'A form cannot choose who buys its lead: a distribution node naming partner_ids answers 422 validation_failed (key distribution.partner_ids, reason not_allowed; nothing is written), and the answer’s distribution carries only status and reason (no partner, price or run).',
  'Website forms (decisions §13): JSON, url-encoded and multipart bodies. A request whose Accept prefers text/html (a browser’s plain form post) is answered with a 303 to the source’s success_url (?id=) or error_url (?error=), or with a small page in English or German (Accept-Language).',
  'A post whose Origin (else Referer) is not among the source’s allowed_origins is refused with 403 origin_not_allowed. One client address may post rate_limit_per_minute times a minute to a source (429 with Retry-After). A filled trap field (honeypot_field) is answered like a success and stores nothing.',
].join('\n\n');

export const IntakeResponse = Type.Object({
  id: Uuid,
  entity: Type.String(),
  created: Type.Boolean(),
  updated: Type.Boolean(),
  warnings: Type.Array(Warning),
  booking: Type.Optional(BookingAnswer),
  distribution: Type.Optional(StartDistributionResponse),
});

/** The source-token door's answer: the distribution node answers without partner details. */
export const SourceTokenIntakeResponse = Type.Object({
  ...IntakeResponse.properties,
  distribution: Type.Optional(SourceTokenDistributionAnswer),
});

export const BulkBody = Type.Object(
  {
    records: Type.Array(
      Type.Unknown({
        description:
          'An entry shaped like the body of POST /api/v1/records, checked on its own: an entry that is not such an object is refused in its result and blocks no other',
      }),
      { minItems: 1, maxItems: 100 },
    ),
  },
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

/** Text that is not blank (the service trims names). */
const NonBlank = (maxLength: number, description?: string) =>
  // NAME_PATTERN: a value of blanks (or of characters that show nothing) reads `required`, as a name's does.
  Type.String({ minLength: 1, maxLength, pattern: NAME_PATTERN, ...(description ? { description } : {}) });
const NoteText = Type.String({ maxLength: 10_000 });

/** Keys of an S1 lead that are parameters, not field names (interface: POST /intake). */
const s1LeadProperties = {
  assignee: Type.Optional(
    Type.String({ maxLength: 254, description: 'The uuid or email of one of the account’s users' }),
  ),
  viewers: Type.Optional(
    Type.Union(
      [
        Type.String({ maxLength: 10_000, description: 'user uuids or emails, comma-separated' }),
        Type.Array(Type.String({ maxLength: 254 }), { maxItems: 100 }),
      ],
      { description: 'Uuids or emails of the account’s users' },
    ),
  ),
  note: Type.Optional(NoteText),
  booking: Type.Optional(
    Type.Union([Type.Boolean(), BookingNode], {
      description: 'true (a booking link) or the booking node of POST /api/v1/records (booking module)',
    }),
  ),
  'booking:starts_at': Type.Optional(BookingNode.properties.starts_at),
  'booking:title': Type.Optional(ShortText),
  'booking:duration_minutes': Type.Optional(BookingNode.properties.duration_minutes),
  'booking:calendar_id': Type.Optional(BookingNode.properties.calendar_id),
  notes: Type.Optional(
    Type.Array(
      Type.Union([
        NoteText,
        Type.Object(
          { text: NoteText, tag: Type.Optional(Type.String({ maxLength: 100 })) },
          {
            ...openNode('notes.<index>'),
            description:
              'A tagged note; another key (a misspelt tag) is the warning {key: notes.<index>.<key>, reason: unmapped}, refused under a strict key',
          },
        ),
      ]),
      { maxItems: 50 },
    ),
  ),
};

const s1LeadOptions = {
  additionalProperties: true,
  maxProperties: 600,
  propertyNames: { maxLength: 200 },
  // `status:<pipeline>` places the lead in a stage (CRM module); the prefix is case-insensitive.
  patternProperties: {
    '^[Ss][Tt][Aa][Tt][Uu][Ss]:': NonBlank(
      100,
      'A status (stage) name or id of that pipeline; one such key per lead (a second answers 422, reason too_many)',
    ),
  },
};

/** POST /api/intake: flat JSON or form; `entity` (or its alias `lead_object`) is required. */
export const S1IntakeBody = Type.Object(
  {
    entity: Type.Optional(NonBlank(100)),
    lead_object: Type.Optional(
      NonBlank(100, 'Another name of entity; given beside entity, it must name the same one (else 422)'),
    ),
    ...s1LeadProperties,
  },
  {
    ...s1LeadOptions,
    anyOf: [{ required: ['entity'] }, { required: ['lead_object'] }],
    description:
      'Known keys as listed; every other key is matched to a field by key or label (case, spaces, _ and - ignored).',
  },
);

/** One lead of POST /api/leads/bulk; its entity is the call's. */
const S1BulkLead = Type.Object(s1LeadProperties, s1LeadOptions);

/** What an S1 answer adds when the lead asked for a booking, or named a stage it was not moved to. */
const s1BookingProperties = {
  booking: Type.Optional(BookingAnswer),
  warnings: Type.Optional(
    Type.Array(Warning, {
      description:
        'Present when the lead asked for a booking (the booking’s warnings), when a status:<pipeline> key named another stage than the stored lead’s, which it does not move ({key: crm, reason: existing_record}; PATCH /api/leads/{id}/status moves it), when a note was blank and added nothing ({key: note or notes.<index>, reason: blank}), or when a note object had a key it does not take ({key: notes.<index>.<key>, reason: unmapped})',
    }),
  ),
};

export const S1IntakeResponse = Type.Object({
  status: Type.Literal('success'),
  lead_id: Uuid,
  created_at: Timestamp,
  ...s1BookingProperties,
});

export const S1BulkBody = Type.Object(
  {
    entity: Type.String({ minLength: 1, maxLength: 100 }),
    batch: Type.Array(S1BulkLead, {
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
  created: Type.Array(
    Type.Object({ lead_id: Uuid, email: Type.Union([Type.String(), Type.Null()]), ...s1BookingProperties }),
  ),
});

/** One entry of a bulk call in its log entry: what became of it. */
const IntakeLogItem = Type.Object(
  {
    index: Type.Integer({ minimum: 0, description: 'Position of the entry in the call' }),
    status: Type.Union(
      ['created', 'updated', 'unchanged', 'refused'].map((value) => Type.Literal(value)),
      { description: 'What became of the entry; `unchanged` is an ignored duplicate' },
    ),
    record_id: Type.Optional(Uuid),
    warnings: Type.Optional(
      Type.Array(Type.Object({ key: Type.String(), reason: Type.String() }, { additionalProperties: true })),
    ),
    error: Type.Optional(Type.String({ description: "The refusal's error code (refused entries)" })),
    details: Type.Optional(Type.Array(Type.Object({}, { additionalProperties: true }))),
  },
  {
    description: 'A refused entry carries `error` (and `details` when there are any), any other `record_id`',
  },
);

export const INTAKE_LOG_OUTCOMES = [
  'created',
  'updated',
  'unchanged',
  'refused',
  'spam',
  'bulk',
  'replayed',
] as const;

/** Filters of the intake log (all optional, combined with and), and its paging. */
export const IntakeLogQuery = Type.Object(
  {
    outcome: Type.Optional(
      Type.String({ enum: [...INTAKE_LOG_OUTCOMES], description: 'entries with this outcome' }),
    ),
    endpoint: Type.Optional(
      Type.String({
        enum: ['records', 'in', 'records.bulk', 's1.intake', 's1.bulk'],
        description: 'entries of calls to this door',
      }),
    ),
    source: Type.Optional(
      Type.String({ minLength: 1, maxLength: 200, description: 'entries whose source has this name' }),
    ),
    entity: Type.Optional(
      Type.String({ minLength: 1, maxLength: 100, description: 'entries naming this entity key' }),
    ),
    record_id: Type.Optional(
      Type.String({
        format: 'uuid',
        description: 'entries of this record, also bulk calls with an entry for it',
      }),
    ),
    request_id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: 'the entry of the call with this X-Request-Id',
      }),
    ),
    created_from: Type.Optional(
      QueryDateOrTimestamp('entries written at or after; a date (YYYY-MM-DD) starts at 00:00 UTC'),
    ),
    created_to: Type.Optional(
      QueryDateOrTimestamp('entries written at or before; a date includes that whole day (UTC)'),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
);

export const IntakeLogList = Type.Object({
  entries: Type.Array(
    Type.Object({
      id: Uuid,
      request_id: Type.String(),
      endpoint: Type.String(),
      outcome: Type.String({
        description:
          '`created`, `updated`, `unchanged` (an ignored duplicate) or `refused` for a single-record call; `bulk` for a bulk call, whose entries are in `items`',
      }),
      status_code: Type.Integer(),
      record_id: Type.Union([Uuid, Type.Null()]),
      entity: Type.Union([Type.String(), Type.Null()]),
      source: Type.Union([Type.String(), Type.Null()]),
      warnings: Type.Array(
        Type.Object({ key: Type.String(), reason: Type.String() }, { additionalProperties: true }),
      ),
      error: Type.Union([Type.String(), Type.Null()]),
      items: Type.Union([Type.Array(IntakeLogItem), Type.Null()], {
        description:
          'A bulk call (`POST /api/v1/records/bulk`, `POST /api/leads/bulk`) is one entry listing every entry of the call in order; null for a single-record call',
      }),
      created_at: Timestamp,
    }),
  ),
  next_cursor: NextCursor,
});

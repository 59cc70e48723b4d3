import { Type } from 'typebox';
import { Cursor, QueryDateOrTimestamp, Timestamp, Uuid } from '../../http/schemas.ts';
import { DELIVERIES_DEFAULT_LIMIT, DELIVERIES_MAX_LIMIT } from './deliveries.service.ts';

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed', 'returned'] as const;
export const RUN_STATUSES = ['decided', 'no_match'] as const;
export const NO_MATCH_REASONS = [
  'no_rule_matched',
  'caps_reached',
  'no_active_participation',
  'already_distributed',
] as const;
export const TRIGGERS = ['api', 'intake', 'automation', 'return'] as const;

const Nullable = <T extends ReturnType<typeof Type.String>>(schema: T) => Type.Union([schema, Type.Null()]);

export const StartDistributionBody = Type.Object(
  {
    record_id: Type.String({
      format: 'uuid',
      description:
        "the record to distribute; an unknown record (or another account's) answers 404 record_not_found, a record whose entity has no enabled distribution 404 no_distribution",
    }),
  },
  { additionalProperties: false },
);

/** The start answer; the intake `distribution` node answers the same shape (decisions §4). */
export const StartDistributionResponse = Type.Object({
  status: Type.String({
    enum: ['distributed', ...RUN_STATUSES],
    description: '`distributed` when at least one delivery was made, else the run status',
  }),
  reason: Type.Union([Type.String({ enum: [...NO_MATCH_REASONS] }), Type.Null()]),
  partner_count: Type.Integer({ minimum: 0 }),
  partner_names: Type.String({ description: 'the partners, comma-separated' }),
  partner: Type.Array(
    Type.Object({
      name: Type.String(),
      email: Type.String(),
      phone: Type.String(),
      city: Type.String(),
      price_cents: Type.Integer(),
      channel: Type.String({ enum: ['webhook', 'email'] }),
      status: Type.String({
        enum: [...DELIVERY_STATUSES],
        description: 'the state after the first attempt, or `pending` while it is under way (10 s at most)',
      }),
    }),
  ),
  price_total: Type.Integer({ description: 'the deliveries’ prices added up, in cents of their currency' }),
  run_id: Uuid,
});

/**
 * The intake node's answer through a source token (`POST /api/v1/in/{token}`, a public form's
 * door): whether the record went out, and why not; no partner, price or run (docs/decisions.md,
 * Distribution runs).
 */
export const SourceTokenDistributionAnswer = Type.Object(
  {
    status: StartDistributionResponse.properties.status,
    reason: StartDistributionResponse.properties.reason,
  },
  {
    description:
      'A source token is anonymous: its answer says whether the record went out, not to whom or for what price',
  },
);

const RunDelivery = {
  id: Uuid,
  status: Type.String({ enum: [...DELIVERY_STATUSES] }),
  partner: Type.String({ description: 'partner name' }),
  partner_id: Uuid,
  channel: Type.String({ enum: ['webhook', 'email'] }),
  price_cents: Type.Integer(),
  currency: Type.String(),
  attempts: Type.Integer({ minimum: 0 }),
  delivered_at: Nullable(Timestamp),
};

export const DistributionRun = Type.Object({
  id: Uuid,
  status: Type.String({ enum: [...RUN_STATUSES] }),
  reason: Type.Union([Type.String({ enum: [...NO_MATCH_REASONS] }), Type.Null()]),
  record_id: Uuid,
  triggered_by: Type.String({ enum: [...TRIGGERS] }),
  started_at: Timestamp,
  finished_at: Nullable(Timestamp),
  deliveries: Type.Array(Type.Object(RunDelivery)),
});

export const Delivery = Type.Object({
  ...RunDelivery,
  rule: Type.String({ description: 'name of the rule that chose the partner' }),
  error: Nullable(Type.String()),
  created_at: Timestamp,
  returned_at: Nullable(Timestamp),
  record_id: Uuid,
  run_id: Uuid,
});

export const DeliveriesQuery = Type.Object(
  {
    status: Type.Optional(Type.String({ enum: [...DELIVERY_STATUSES] })),
    partner_id: Type.Optional(Uuid),
    record_id: Type.Optional(Type.String({ format: 'uuid', description: "only this record's deliveries" })),
    from: Type.Optional(QueryDateOrTimestamp('created at or after; a date (YYYY-MM-DD) starts at 00:00 UTC')),
    to: Type.Optional(
      QueryDateOrTimestamp('created at or before; a date (YYYY-MM-DD) includes that whole day (UTC)'),
    ),
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: DELIVERIES_MAX_LIMIT,
        default: DELIVERIES_DEFAULT_LIMIT,
        description: `at most ${DELIVERIES_MAX_LIMIT}; more answers 422`,
      }),
    ),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
);

export const DeliveryList = Type.Object({
  deliveries: Type.Array(Delivery),
  next_cursor: Type.Union([Type.String(), Type.Null()], {
    description: 'the cursor of the next page with the same filters; null on the last page',
  }),
});

export const ReturnBody = Type.Object(
  {
    reason_id: Type.Optional(
      Type.String({
        format: 'uuid',
        description: 'one of the account’s return reasons; another id answers 422 (reason not_found)',
      }),
    ),
    text: Type.Optional(Type.String({ maxLength: 2000 })),
    reported_by: Type.Optional(Type.String({ maxLength: 200 })),
  },
  {
    additionalProperties: false,
    description:
      'A delivered delivery within its distribution’s return deadline is returned; otherwise 409 return_not_allowed with reason deadline_passed, not_delivered or already_returned',
  },
);

export const ReturnResponse = Type.Object({
  returned: Type.Boolean(),
  redistributed: Type.Boolean({ description: 'the record went to another partner (redistribute_on_return)' }),
});

export const ParticipationTestResult = Type.Object({
  ok: Type.Boolean(),
  channel: Type.String({ enum: ['webhook', 'email'] }),
  message: Type.String(),
  status: Type.Integer({
    description: "the receiver's HTTP status or the SMTP reply code; 0 when there was no answer",
  }),
  response: Type.String({ description: 'the first 1 KiB of the answer' }),
  request: Type.Object({
    url: Type.String({ description: 'the webhook URL, or `mailto:` and the address' }),
    body: Type.String({ description: 'the webhook body, or the email’s text part' }),
  }),
});

import { type Static, Type } from 'typebox';
import { Name, NextCursor, Timestamp, Uuid } from '../../http/schemas.ts';
import { EntityKey } from '../entities/entities.schemas.ts';

/** Bounds of a distribution's setup (decisions §8), far above real setups. */
export const MAX_PARTICIPATIONS = 200;
export const MAX_RULES = 100;
export const MAX_FILTERS = 20;
export const MAX_FILTER_VALUES = 100;
export const MAX_RETURN_REASONS = 200;

export const STRATEGIES = ['all', 'round_robin', 'weighted', 'cheapest', 'priciest'] as const;
export const FILTER_OPS = ['equals', 'in', 'range', 'postal_prefix'] as const;
export const CHANNELS = ['webhook', 'email'] as const;

export const EntityKeyParams = Type.Object({
  entity_key: Type.String({
    ...EntityKey,
    description: 'the key of one of the account’s entities; another answers 404 not_found',
  }),
});

export const PutDistributionBody = Type.Object(
  {
    return_deadline_days: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 365,
        description: 'days after delivery in which a return is accepted; 0 accepts none (14 when created)',
      }),
    ),
    redistribute_on_return: Type.Optional(
      Type.Boolean({ description: 'a returned record is distributed again (false when created)' }),
    ),
    enabled: Type.Optional(Type.Boolean({ description: 'false keeps the setup but distributes nothing' })),
  },
  { additionalProperties: false, description: 'A missing key keeps its value (its default on creation)' },
);

const HOUR_MINUTE = '^([01][0-9]|2[0-3]):[0-5][0-9]$';

const Caps = Type.Object(
  {
    day: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, description: 'deliveries per day' })),
    month: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 1_000_000, description: 'deliveries per calendar month' }),
    ),
  },
  { additionalProperties: false, description: 'counted in the schedule’s time zone (UTC without one)' },
);

const CapsUpdate = Type.Object(
  {
    day: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1, maximum: 1_000_000 }), Type.Null()], {
        description: 'deliveries per day; null removes the cap',
      }),
    ),
    month: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1, maximum: 1_000_000 }), Type.Null()], {
        description: 'deliveries per calendar month; null removes the cap',
      }),
    ),
  },
  { additionalProperties: false, description: 'a missing member keeps its cap' },
);

export const Schedule = Type.Object(
  {
    time_zone: Type.String({
      minLength: 1,
      maxLength: 100,
      description: 'an IANA time zone, e.g. Europe/Berlin; another answers 422 reason invalid_time_zone',
    }),
    weekdays: Type.Array(Type.Integer({ minimum: 1, maximum: 7 }), {
      minItems: 1,
      maxItems: 7,
      description: 'active weekdays, 1 = Monday … 7 = Sunday',
    }),
    from: Type.String({ pattern: HOUR_MINUTE, description: 'start of the active hours, HH:MM' }),
    to: Type.String({
      pattern: '^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$',
      description:
        'end of the active hours, HH:MM (24:00 for midnight); before from: a night window of the weekday it starts on; equal to from: 422 reason invalid_range',
    }),
  },
  { additionalProperties: false },
);

const PartnerIdMember = Type.String({
  format: 'uuid',
  description: 'a partner of the account that is not retired; another answers 422 reason unknown_partner',
});
const ChannelMember = Type.String({ enum: [...CHANNELS], description: 'how deliveries are sent' });
const AddressMember = Type.String({
  minLength: 1,
  maxLength: 2000,
  description:
    'webhook: an absolute http(s) URL without credentials whose address the outbound policy allows (a private or loopback IP answers 422 reason blocked_address; names are checked at each send); email: an email address; another value answers 422 reason invalid_format',
});
const PriceMember = Type.Integer({
  minimum: 0,
  maximum: 100_000_000,
  description: 'price per delivery in cents',
});
const CurrencyMember = Type.String({
  pattern: '^[A-Z]{3}$',
  description:
    'the ISO 4217 code of a currency in use (another answers 422 reason invalid_currency), EUR when not given',
});
const WeightMember = Type.Integer({
  minimum: 1,
  maximum: 1000,
  description: 'share under the weighted strategy',
});
const PausedMember = Type.Boolean({ description: 'a paused participation is skipped' });

export const CreateParticipationBody = Type.Object(
  {
    partner_id: PartnerIdMember,
    channel: ChannelMember,
    address: AddressMember,
    price_cents: PriceMember,
    currency: Type.Optional(CurrencyMember),
    caps: Type.Optional(Caps),
    schedule: Type.Optional(Schedule),
    weight: Type.Optional(WeightMember),
    paused: Type.Optional(PausedMember),
  },
  {
    additionalProperties: false,
    description: `At most ${MAX_PARTICIPATIONS} participations per distribution (422 reason too_many)`,
  },
);

export const UpdateParticipationBody = Type.Object(
  {
    partner_id: Type.Optional(PartnerIdMember),
    channel: Type.Optional(ChannelMember),
    address: Type.Optional(AddressMember),
    price_cents: Type.Optional(PriceMember),
    currency: Type.Optional(CurrencyMember),
    caps: Type.Optional(Type.Union([CapsUpdate, Type.Null()], { description: 'null removes both caps' })),
    schedule: Type.Optional(Type.Union([Schedule, Type.Null()], { description: 'null: always active' })),
    weight: Type.Optional(WeightMember),
    paused: Type.Optional(
      Type.Boolean({ description: 'a paused participation is skipped; false also clears paused_reason' }),
    ),
    rotate_secret: Type.Optional(
      Type.Boolean({
        description:
          'webhook: a new signing secret, answered once; the old one signs beside it for 24 hours. On an email participation 422 reason not_allowed',
      }),
    ),
  },
  {
    additionalProperties: false,
    description:
      'A missing key stays as it is; a changed channel or address needs the other to fit (422 reason invalid_format)',
  },
);

const FilterValue = Type.Union([Type.String({ maxLength: 500 }), Type.Number(), Type.Boolean()]);

const RuleFilter = Type.Object(
  {
    field: Type.String({
      minLength: 1,
      maxLength: 100,
      description: 'a field key of the entity; another answers 422 reason unknown_field',
    }),
    op: Type.String({ enum: [...FILTER_OPS] }),
    value: Type.Optional(
      Type.Union([Type.String({ maxLength: 500 }), Type.Number(), Type.Boolean()], {
        description:
          'equals: the value (on a select or multiselect field one of its options, else 422 reason unknown_option); with another op 422 reason not_allowed, missing with equals 422 reason required',
      }),
    ),
    values: Type.Optional(
      Type.Array(FilterValue, {
        minItems: 1,
        maxItems: MAX_FILTER_VALUES,
        description:
          'in: the values (on a select or multiselect field each one of its options, else 422 reason unknown_option); with another op 422 reason not_allowed, missing with in 422 reason required',
      }),
    ),
    min: Type.Optional(
      Type.Union([Type.Number(), Type.String({ maxLength: 100 })], {
        description:
          'range: the lower bound (a number, or a date as text); with another op 422 reason not_allowed; range without min and max 422 reason required; above max 422 reason invalid_range',
      }),
    ),
    max: Type.Optional(
      Type.Union([Type.Number(), Type.String({ maxLength: 100 })], {
        description: 'range: the upper bound; with another op 422 reason not_allowed',
      }),
    ),
    prefix: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 20,
        description:
          'postal_prefix: the start of the postal code; with another op 422 reason not_allowed, missing with postal_prefix 422 reason required',
      }),
    ),
  },
  {
    additionalProperties: false,
    description:
      'equals takes value; in takes values; range takes min and/or max; postal_prefix takes prefix. A member the op does not take, or a missing one, answers 422 (reason not_allowed or required)',
  },
);

const RuleInput = Type.Object(
  {
    name: Name(
      100,
      'unique within the distribution (in any case); a repeated name answers 422 reason duplicate',
    ),
    filter: Type.Optional(
      Type.Array(RuleFilter, {
        maxItems: MAX_FILTERS,
        description: 'all conditions must hold; none: every record',
      }),
    ),
    strategy: Type.String({ enum: [...STRATEGIES] }),
    max_partners: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 100,
        description: 'how many partners receive the record (1 when not given)',
      }),
    ),
    participation_ids: Type.Array(Uuid, {
      minItems: 1,
      maxItems: MAX_PARTICIPATIONS,
      description:
        'participations of this distribution the rule chooses from, each once; another id answers 422 reason unknown_participation, a repeated one reason duplicate',
    }),
  },
  { additionalProperties: false },
);

export const PutRulesBody = Type.Array(RuleInput, {
  maxItems: MAX_RULES,
  description:
    'The rules in the order they are tried; they replace the previous ones (a rule keeps its id and round-robin position when its name stays)',
});

export type ParticipationInput = Static<typeof CreateParticipationBody>;
export type ParticipationChanges = Static<typeof UpdateParticipationBody>;
export type RuleSettings = Static<typeof RuleInput>;
export type ScheduleSettings = Static<typeof Schedule>;

const NullableInteger = Type.Union([Type.Integer(), Type.Null()]);

export const Participation = Type.Object({
  id: Uuid,
  entity: Type.String({ description: 'the key of the distribution’s entity' }),
  partner_id: Uuid,
  partner_name: Type.String(),
  partner_retired: Type.Boolean({ description: 'a retired partner’s participation is skipped' }),
  channel: Type.String({ enum: [...CHANNELS] }),
  address: Type.String(),
  price_cents: Type.Integer(),
  currency: Type.String(),
  caps: Type.Object({ day: NullableInteger, month: NullableInteger }),
  schedule: Type.Union([Schedule, Type.Null()]),
  weight: Type.Integer(),
  paused: Type.Boolean(),
  paused_reason: Type.Union([
    Type.String({ description: '`gone`: the receiver answered 410; null when paused by hand' }),
    Type.Null(),
  ]),
  previous_secret_until: Type.Union([Timestamp, Type.Null()], {
    description: 'webhook: until when the secret before the last rotation still signs',
  }),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const ParticipationWithSecret = Type.Object({
  ...Participation.properties,
  secret: Type.Optional(
    Type.String({ description: 'webhook: `whsec_…`, shown only in this answer (on creation and rotation)' }),
  ),
});

export const Rule = Type.Object({
  id: Uuid,
  name: Type.String(),
  position: Type.Integer({ description: '0 for the rule tried first' }),
  filter: Type.Array(
    Type.Object({
      field: Type.String(),
      op: Type.String({ enum: [...FILTER_OPS] }),
      value: Type.Optional(FilterValue),
      values: Type.Optional(Type.Array(FilterValue)),
      min: Type.Optional(Type.Union([Type.Number(), Type.String()])),
      max: Type.Optional(Type.Union([Type.Number(), Type.String()])),
      prefix: Type.Optional(Type.String()),
    }),
  ),
  strategy: Type.String({ enum: [...STRATEGIES] }),
  max_partners: Type.Integer(),
  participation_ids: Type.Array(Uuid),
});

export const RuleList = Type.Array(Rule, { description: 'in the order they are tried' });

export const DistributionSetup = Type.Object({
  id: Uuid,
  entity: Type.String(),
  return_deadline_days: Type.Integer(),
  redistribute_on_return: Type.Boolean(),
  enabled: Type.Boolean(),
  participations: Type.Array(Participation, { description: 'oldest first; never with a secret' }),
  rules: RuleList,
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const DistributionSetupList = Type.Object({
  distributions: Type.Array(DistributionSetup),
  next_cursor: NextCursor,
});

export const CreateReturnReasonBody = Type.Object(
  {
    name: Name(
      200,
      `a name the account has already (in any case) answers 409 return_reason_taken; at most ${MAX_RETURN_REASONS} per account (422 reason too_many)`,
    ),
  },
  { additionalProperties: false },
);

export const ReturnReason = Type.Object({ id: Uuid, name: Type.String() });
export const ReturnReasonList = Type.Object({
  return_reasons: Type.Array(ReturnReason),
  next_cursor: NextCursor,
});

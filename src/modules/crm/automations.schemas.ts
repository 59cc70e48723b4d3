import { Type } from 'typebox';
import { NextCursor, Timestamp, Name as TitleName, Uuid } from '../../http/schemas.ts';

export const ACTION_TYPES = ['webhook', 'email', 'note', 'distribute', 'move_stage'] as const;
export type ActionType = (typeof ACTION_TYPES)[number];

const nameSchema = (description?: string) =>
  Type.String({ minLength: 1, maxLength: 100, ...(description ? { description } : {}) });
const Name = nameSchema();

/** One object for every type: which members a type takes is checked by the service, which names the member. */
export const AutomationAction = Type.Object(
  {
    type: Type.String({
      enum: [...ACTION_TYPES],
      description:
        'distribute needs the distribution module on the account, else 422 module_not_enabled, and (unless saved disabled) a distribution of the entity, else 422 no_distribution; email and webhook send record data, so an API key needs records:read beside settings to create or change such an automation, else 403 forbidden',
    }),
    url: Type.Optional(
      Type.String({ minLength: 1, maxLength: 2000, description: 'webhook: where to POST, signed' }),
    ),
    to: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 320,
        description:
          'email: an address, or exactly one `{{field}}` (blanks around it allowed, nothing else) naming a field with the email format or role',
      }),
    ),
    subject: Type.Optional(Type.String({ minLength: 1, maxLength: 500, description: 'email: a template' })),
    body: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 20_000,
        description:
          'email and note: a template (a `{{…}}` that is not exactly one variable answers 422 invalid_format); an email body with markup is sent as HTML, its values escaped; `{{record_token}}` only in an email with record_token_fields (a note mints none: 422)',
      }),
    ),
    record_token_fields: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 100 }), {
        minItems: 1,
        maxItems: 100,
        description: 'email: the fields the `{{record_token}}` opens',
      }),
    ),
    record_token_days: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 30,
        description: 'email: lifetime of the record token in days (30 when not given)',
      }),
    ),
    pipeline: Type.Optional(nameSchema('move_stage: the target pipeline')),
    stage: Type.Optional(nameSchema('move_stage: the target stage')),
  },
  {
    additionalProperties: false,
    description:
      'webhook: url; email: to, subject, body, record_token_fields?, record_token_days?; note: body; distribute (needs the distribution module: 422 module_not_enabled); move_stage: stage, pipeline?. A member another type takes, an unknown field or stage answers 422',
  },
);

export const CreateAutomationBody = Type.Object(
  {
    name: TitleName(200),
    entity: nameSchema('an entity key of the account; another answers 422 unknown_entity'),
    pipeline: Type.Optional(nameSchema('required when the entity has several pipelines')),
    stage: nameSchema('the target stage: a move into it runs the automation'),
    action: AutomationAction,
    enabled: Type.Optional(Type.Boolean({ default: true })),
  },
  { additionalProperties: false },
);

export const UpdateAutomationBody = Type.Object(
  {
    name: Type.Optional(TitleName(200)),
    entity: Type.Optional(Name),
    pipeline: Type.Optional(Name),
    stage: Type.Optional(Name),
    action: Type.Optional(AutomationAction),
    enabled: Type.Optional(Type.Boolean()),
    rotate_secret: Type.Optional(
      Type.Boolean({
        description:
          'webhook actions: a new signing secret, answered once as `secret`; for 24 hours messages carry both signatures (decisions §12)',
      }),
    ),
  },
  { additionalProperties: false },
);

export const Automation = Type.Object({
  id: Uuid,
  name: Type.String(),
  entity: Type.String(),
  pipeline: Type.String(),
  stage: Type.String(),
  action: Type.Record(Type.String(), Type.Unknown()),
  enabled: Type.Boolean(),
  destination: Type.Optional(
    Type.Object(
      {
        enabled: Type.Boolean(),
        disabled_reason: Type.Union([
          Type.String({
            description: '`gone` (the receiver answered 410) or `failing` (every message failed too long)',
          }),
          Type.Null(),
        ]),
        failing_since: Type.Union([Timestamp, Type.Null()]),
      },
      {
        description:
          'webhook actions only: their destination as an account webhook shows it. Disabled by the engine, every run fails (`destination_disabled`) until any PATCH of the automation enables it again',
      },
    ),
  ),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const AutomationWithSecret = Type.Object({
  ...Automation.properties,
  secret: Type.Optional(
    Type.String({
      description:
        'webhook actions: `whsec_…`, shown only when the webhook is created or its secret rotated (`rotate_secret`)',
    }),
  ),
});

export const AutomationList = Type.Object({ automations: Type.Array(Automation), next_cursor: NextCursor });

/**
 * The 422 of a refused automation: `validation_failed` with a detail for each problem, or, when
 * the only problem is a module the action needs, `module_not_enabled` with that detail
 * (decisions §7: distribute without the distribution module).
 */
export const AutomationRefused = Type.Object(
  {
    error: Type.String({ enum: ['validation_failed', 'module_not_enabled'] }),
    details: Type.Array(Type.Object({ key: Type.String(), reason: Type.String(), message: Type.String() })),
  },
  {
    additionalProperties: true,
    description:
      'A setting refused: validation_failed naming each problem, or module_not_enabled when the action needs a module the account lacks (distribute) and nothing else is wrong',
  },
);

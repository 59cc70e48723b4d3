import { Type } from 'typebox';
import { Timestamp, Uuid } from '../../http/schemas.ts';
import { DUPLICATE_ACTIONS, FIELD_TYPES, ROLES } from './entities.model.ts';

export const KEY_PATTERN = '^[a-z][a-z0-9_]{0,99}$';
export const EntityKey = Type.String({ pattern: '^[a-z][a-z0-9_-]{0,99}$' });

const FieldInput = Type.Object(
  {
    key: Type.String({ pattern: KEY_PATTERN }),
    label: Type.String({ minLength: 1, maxLength: 100 }),
    type: Type.String({ enum: [...FIELD_TYPES] }),
    format: Type.Optional(Type.Union([Type.String({ maxLength: 40 }), Type.Null()])),
    required: Type.Optional(Type.Boolean()),
    options: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 500 })),
    role: Type.Optional(Type.Union([Type.String({ enum: [...ROLES] }), Type.Null()])),
  },
  { additionalProperties: false },
);

export const PutEntityBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    fields: Type.Array(FieldInput, { maxItems: 300 }),
    duplicate_rule: Type.Optional(
      Type.Union([
        Type.Object(
          {
            match: Type.Array(Type.String({ pattern: KEY_PATTERN }), { minItems: 1, maxItems: 10 }),
            action: Type.String({ enum: [...DUPLICATE_ACTIONS] }),
          },
          { additionalProperties: false },
        ),
        Type.Null(),
      ]),
    ),
    pipelines: Type.Optional(
      Type.Array(
        Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 100 }),
            stages: Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { minItems: 1, maxItems: 100 }),
          },
          { additionalProperties: false },
        ),
        { maxItems: 20 },
      ),
    ),
    archived: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

export const S2Field = Type.Object({
  key: Type.String(),
  label: Type.String(),
  type: Type.String(),
  format: Type.Union([Type.String(), Type.Null()]),
  required: Type.Boolean(),
  options: Type.Optional(Type.Array(Type.String())),
  role: Type.Union([Type.String(), Type.Null()]),
});

export const S2Entity = Type.Object({
  key: Type.String(),
  name: Type.String(),
  archived: Type.Boolean(),
  fields: Type.Array(S2Field),
});

export const S2EntityList = Type.Object({
  entities: Type.Array(S2Entity),
  modules: Type.Array(Type.String()),
});

export const SettingsEntity = Type.Object({
  id: Uuid,
  key: Type.String(),
  name: Type.String(),
  archived: Type.Boolean(),
  fields: Type.Array(S2Field),
  duplicate_rule: Type.Union([
    Type.Object({ match: Type.Array(Type.String()), action: Type.String() }),
    Type.Null(),
  ]),
  pipelines: Type.Array(Type.Object({ name: Type.String(), stages: Type.Array(Type.String()) })),
  duplicate_keys: Type.Object(
    {
      status: Type.Union([Type.Literal('current'), Type.Literal('recomputing')], {
        description:
          'current: every stored record is keyed under the duplicate rule; recomputing: a rule change is being applied to the stored records in the background (new records are keyed under the new rule at once)',
      }),
      done: Type.Integer({
        minimum: 0,
        description: 'records re-keyed so far (equal to total once current)',
      }),
      total: Type.Integer({
        minimum: 0,
        description: 'records the entity had when the rule last changed (0 if it never changed)',
      }),
    },
    { description: "Whether the stored records' duplicate keys follow the current duplicate rule" },
  ),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const SettingsEntityList = Type.Object({ entities: Type.Array(SettingsEntity) });

export const S1Entity = Type.Object({
  id: Uuid,
  slug: Type.String(),
  label: Type.String(),
  fields: Type.Array(
    Type.Object({
      key: Type.String(),
      label: Type.String(),
      type: Type.String(),
      required: Type.Boolean(),
      options: Type.Optional(Type.Array(Type.String())),
    }),
  ),
});

export const S1EntityList = Type.Array(S1Entity);

import { Type } from 'typebox';
import { ifThen, Name, Timestamp, Uuid, Warning } from '../../http/schemas.ts';
import { DUPLICATE_ACTIONS, FIELD_TYPES, FORMATS_BY_TYPE, ROLES } from './entities.model.ts';
import { RESERVED_FIELD_KEYS } from './reserved-keys.ts';

export const KEY_PATTERN = '^[a-z][a-z0-9_]{0,99}$';
export const EntityKey = Type.String({ pattern: '^[a-z][a-z0-9_-]{0,99}$' });

/** The entity key in a settings path: one not of an entity key's form names no entity. */
export const EntityKeyParams = Type.Object({
  key: Type.String({
    ...EntityKey,
    description:
      "The entity's key: lower-case letters, digits, `_` and `-`, starting with a letter, up to 100 characters; a key not of that form names no entity (404 not_found)",
  }),
});

/** Entities an account may have that are not archived: each is read on every intake and listed. */
export const MAX_ACTIVE_ENTITIES = 50;
/**
 * Entities an account may have in all, archived ones included: those are loaded and listed too,
 * and there is no deleting one (an archived entity's key can be defined anew).
 */
export const MAX_ENTITIES = 100;

const ALL_FORMATS = [...new Set(Object.values(FORMATS_BY_TYPE).flat())];

/**
 * What each field type allows (decisions §3): its formats, options only on select types (and
 * required there), a role only on text fields.
 */
const rulesByType = FIELD_TYPES.map((type) => {
  const formats = FORMATS_BY_TYPE[type] ?? [];
  const isSelect = type === 'select' || type === 'multiselect';
  return ifThen(
    { properties: { type: { const: type } }, required: ['type'] },
    {
      properties: {
        format: { enum: [...formats, null] },
        options: { type: 'array', ...(isSelect ? { minItems: 1 } : { maxItems: 0 }) },
        ...(type === 'text' ? {} : { role: { const: null } }),
      },
      ...(isSelect ? { required: ['options'] } : {}),
    },
  );
});

const FieldInput = Type.Object(
  {
    key: Type.String({
      pattern: KEY_PATTERN,
      description: `Not a name intake takes at the top level of a record for itself (${RESERVED_FIELD_KEYS.map((name) => `\`${name}\``).join(', ')}): else 422 validation_failed, reason \`not_allowed\`, keyed \`fields.<index>.key\``,
    }),
    label: Name(
      100,
      "Matched by intake like the key: unlike the entity's other labels once case, spaces, `_` and `-` are ignored (else 422 validation_failed, reason `duplicate`, keyed `fields.<index>.label`)",
    ),
    type: Type.String({ enum: [...FIELD_TYPES] }),
    format: Type.Optional(Type.Union([Type.String({ enum: ALL_FORMATS }), Type.Null()])),
    required: Type.Optional(Type.Boolean()),
    options: Type.Optional(
      Type.Array(
        Name(
          200,
          'An option intake matches once case and blanks around it are ignored, so options must differ that way too (else 422 validation_failed, reason `duplicate`, keyed `fields.<index>.options`)',
        ),
        { maxItems: 500, uniqueItems: true },
      ),
    ),
    role: Type.Optional(
      Type.Union([Type.String({ enum: [...ROLES] }), Type.Null()], {
        description: 'text fields only; each role on one field at most',
      }),
    ),
  },
  { additionalProperties: false, allOf: rulesByType },
);

export const PutEntityBody = Type.Object(
  {
    name: Name(
      200,
      `A new entity beyond ${MAX_ACTIVE_ENTITIES} not archived, or beyond ${MAX_ENTITIES} in all (archived ones included), answers 422 validation_failed, reason \`too_many\`, keyed \`name\``,
    ),
    fields: Type.Array(FieldInput, { maxItems: 300, description: 'field keys distinct' }),
    duplicate_rule: Type.Optional(
      Type.Union([
        Type.Object(
          {
            match: Type.Array(Type.String({ pattern: KEY_PATTERN }), {
              minItems: 1,
              maxItems: 10,
              uniqueItems: true,
              description:
                'distinct keys of fields of this entity, not of type file, files or multiselect (a key given twice answers 422, reason `duplicate`)',
            }),
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
            name: Name(100),
            stages: Type.Array(Name(100), {
              minItems: 1,
              maxItems: 100,
              uniqueItems: true,
            }),
          },
          { additionalProperties: false },
        ),
        { maxItems: 20, description: 'pipeline names distinct' },
      ),
    ),
    archived: Type.Optional(
      Type.Boolean({
        description: `\`false\` (the default) on an archived entity brings it back: beyond ${MAX_ACTIVE_ENTITIES} entities not archived answers 422 validation_failed, reason \`too_many\`, keyed \`archived\``,
      }),
    ),
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

/** A `PUT`'s answer: the entity, and what the change left unfitting among stored values. */
export const PutEntityAnswer = Type.Object({
  ...SettingsEntity.properties,
  warnings: Type.Optional(
    Type.Array(Warning, {
      description:
        'Present when stored values may no longer fit the definition: reason `values_kept`, keyed `fields.<index>.type`, `.format` (records holding a value of a field whose type or format changed) or `.options` (records holding an option the field no longer lists); reason `values_missing`, keyed `fields.<index>.required` (records without a value of a field made required). The values are kept as they are, never converted, dropped or filled in.',
    }),
  ),
});

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
  pipelines: Type.Array(
    Type.Object({
      id: Uuid,
      name: Type.String(),
      statuses: Type.Array(Type.Object({ id: Uuid, name: Type.String() })),
    }),
    {
      description:
        "The entity's pipelines and their statuses (stages), first to last: `status:<pipeline>` on intake takes a status's name or id",
    },
  ),
});

export const S1EntityList = Type.Array(S1Entity);

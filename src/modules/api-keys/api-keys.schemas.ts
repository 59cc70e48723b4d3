import { Type } from 'typebox';
import { PERMISSIONS } from '../../http/auth.ts';
import { Name, NextCursor, Timestamp, Uuid } from '../../http/schemas.ts';

export const Permission = Type.String({ enum: [...PERMISSIONS] });

/** Users and roles are the owner's (decisions §14): what a key made by an admin lacks. */
const ManagesUsers = Type.Boolean({
  description:
    'Whether the key may create, change and remove users: a key holding every permission made by the operator, by an owner or by such a key may; a key with fewer permissions, or made by a signed-in admin (or by a key that may not), may not',
});

export const ApiKeyName = Name(100);

export const ApiKey = Type.Object({
  id: Uuid,
  name: Type.String(),
  prefix: Type.String(),
  strict: Type.Boolean(),
  permissions: Type.Array(Type.String()),
  manages_users: ManagesUsers,
  created_at: Timestamp,
});

export const CreatedApiKey = Type.Object({
  id: Uuid,
  name: Type.String(),
  key: Type.String({ description: 'The key itself; shown only in this answer' }),
  prefix: Type.String(),
  strict: Type.Boolean(),
  permissions: Type.Array(Type.String()),
  manages_users: ManagesUsers,
  created_at: Timestamp,
});

/** What a new key may be given beside its name, here and in the operator API (accounts). */
export const NewKeyOptions = {
  strict: Type.Optional(Type.Boolean()),
  permissions: Type.Optional(
    Type.Array(Permission, {
      minItems: 1,
      maxItems: 20,
      uniqueItems: true,
      description:
        'At least one permission, each once (422 otherwise); without it, every permission the maker may give; a key may give only the permissions it holds (403 forbidden for more)',
    }),
  ),
};

export const CreateApiKeyBody = Type.Object(
  { name: ApiKeyName, ...NewKeyOptions },
  { additionalProperties: false },
);

export const UpdateApiKeyBody = Type.Object(
  { name: Type.Optional(ApiKeyName), strict: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);

export const ApiKeyList = Type.Object({ api_keys: Type.Array(ApiKey), next_cursor: NextCursor });

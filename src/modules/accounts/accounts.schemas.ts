import { Type } from 'typebox';
import { MODULES } from '../../http/auth.ts';
import { Name, NextCursor, Timestamp, Uuid } from '../../http/schemas.ts';
import { ApiKeyName, NewKeyOptions } from '../api-keys/api-keys.schemas.ts';

const ModuleName = Type.String({ enum: [...MODULES] });
const AccountName = Name(200);
const RateLimit = Type.Integer({ minimum: 1, maximum: 1_000_000 });

export const Account = Type.Object({
  id: Uuid,
  name: Type.String(),
  modules: Type.Array(Type.String()),
  rate_limit_per_minute: Type.Integer(),
  created_at: Timestamp,
});

export const CreatedAccount = Type.Object({
  id: Uuid,
  name: Type.String(),
  modules: Type.Array(Type.String()),
  rate_limit_per_minute: Type.Integer(),
  created_at: Timestamp,
  api_key: Type.Object({ id: Uuid, name: Type.String(), key: Type.String() }),
});

export const CreateAccountBody = Type.Object(
  {
    name: AccountName,
    modules: Type.Optional(Type.Array(ModuleName, { maxItems: 10 })),
    rate_limit_per_minute: Type.Optional(RateLimit),
  },
  { additionalProperties: false },
);

export const UpdateAccountBody = Type.Object(
  {
    name: Type.Optional(AccountName),
    modules: Type.Optional(Type.Array(ModuleName, { maxItems: 10 })),
    rate_limit_per_minute: Type.Optional(RateLimit),
  },
  { additionalProperties: false },
);

export const AccountList = Type.Object({ accounts: Type.Array(Account), next_cursor: NextCursor });

/** A key the operator issues to an account (`name` defaults to "Operator key"). */
export const CreateAccountKeyBody = Type.Object(
  { name: Type.Optional(ApiKeyName), ...NewKeyOptions },
  { additionalProperties: false },
);

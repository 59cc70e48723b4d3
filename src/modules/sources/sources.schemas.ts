import { Type } from 'typebox';
import { Name, NextCursor, Timestamp, Uuid } from '../../http/schemas.ts';

/** Bounds of a source's website-form settings (decisions §13; docs/decisions.md, "Website forms"). */
export const FORM_LIMITS = {
  urlLength: 2000,
  origins: 50,
  originLength: 200,
  honeypotLength: 100,
  ratePerMinuteMax: 10_000,
} as const;

const Address = (what: string) =>
  Type.Union(
    [
      Type.String({
        maxLength: FORM_LIMITS.urlLength,
        pattern: '^[Hh][Tt][Tt][Pp][Ss]?://[^\\s]+$',
        description: `${what}: an absolute http or https address (at most ${FORM_LIMITS.urlLength} characters, no user or password); another value answers 422`,
      }),
      Type.Null(),
    ],
    { description: `${what}; null for the service's own page` },
  );

/** The website-form settings a source carries (decisions §13). */
export const formSettingsProperties = {
  success_url: Type.Optional(
    Address('Where a browser is sent (303) after a form was received, with `?id=<record id>` added'),
  ),
  error_url: Type.Optional(
    Address('Where a browser is sent (303) when its form was refused, with `?error=<code>` added'),
  ),
  allowed_origins: Type.Optional(
    Type.Array(
      Type.String({
        maxLength: FORM_LIMITS.originLength,
        pattern: '^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@\\s]+$',
        description:
          'An origin, scheme://host[:port] (http or https, no path); a host that is not a valid name or address answers 422',
      }),
      {
        maxItems: FORM_LIMITS.origins,
        description:
          'Origins whose pages may post to this source and read its answers (CORS); empty lets any origin post. Duplicates are kept once.',
      },
    ),
  ),
  honeypot_field: Type.Optional(
    Type.Union(
      [
        Type.String({
          minLength: 1,
          maxLength: FORM_LIMITS.honeypotLength,
          pattern: '^[A-Za-z_][A-Za-z0-9_-]*$',
          description:
            'Name of the trap field (letters, digits, _ and -); not one of the body’s own keys (entity, fields, meta, note, documents, crm, booking, distribution), else 422',
        }),
        Type.Null(),
      ],
      {
        description: 'A post that fills this field is answered as received and stored as spam; null: no trap',
      },
    ),
  ),
  rate_limit_per_minute: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: FORM_LIMITS.ratePerMinuteMax,
      description: 'Posts a minute one client address may make to this source (default 60)',
    }),
  ),
};

/**
 * Sources an account may have: each is a form, ad account or system sending leads, and every
 * creation and rename compares the new name with all of them (under the account's lock).
 */
export const MAX_SOURCES = 500;

export const CreateSourceBody = Type.Object(
  { name: Name(100), ...formSettingsProperties },
  { additionalProperties: false },
);

export const UpdateSourceBody = Type.Object(
  {
    name: Type.Optional(Name(100, 'A name no other source of the account has')),
    ...formSettingsProperties,
  },
  { additionalProperties: false, description: 'A missing key leaves that setting unchanged' },
);

const formSettingsOut = {
  success_url: Type.Union([Type.String(), Type.Null()]),
  error_url: Type.Union([Type.String(), Type.Null()]),
  allowed_origins: Type.Array(Type.String()),
  honeypot_field: Type.Union([Type.String(), Type.Null()]),
  rate_limit_per_minute: Type.Integer(),
};

export const Token = Type.String({
  description: 'Source token for POST /api/v1/in/{token}; shown only here',
});

export const IntakeUrl = Type.String({
  description:
    'PUBLIC_URL/api/v1/in/{token}: where the source posts (and a website form’s action); shown only here',
});

export const SourceView = Type.Object({
  id: Uuid,
  name: Type.String(),
  token_prefix: Type.Union([Type.String(), Type.Null()]),
  ...formSettingsOut,
  created_at: Timestamp,
});

export const CreatedSource = Type.Object({
  id: Uuid,
  name: Type.String(),
  token: Token,
  intake_url: IntakeUrl,
  ...formSettingsOut,
  created_at: Timestamp,
});

export const SourceList = Type.Object({ sources: Type.Array(SourceView), next_cursor: NextCursor });

import { type TSchema, Type } from 'typebox';
import { Cursor, NextCursor, Timestamp, Name as TitleName, Uuid } from '../../http/schemas.ts';

/** Partners listed per page at most (and by default: the interface's list has no paging of its own). */
export const MAX_PARTNERS_PER_PAGE = 500;

/**
 * The body keys of a partner: snake_case, and the earlier camelCase spelling where it differs
 * (interface: POST /api/v1/distribution/partners). The service reads both.
 */
export const PARTNER_KEY_SPELLINGS = {
  contact_person: 'contactPerson',
  postal_code: 'postalCode',
  vat_id: 'vatId',
  billing_address_differs: 'billingAddressDiffers',
  billing_name: 'billingName',
  billing_street: 'billingStreet',
  billing_postal_code: 'billingPostalCode',
  billing_city: 'billingCity',
  billing_country: 'billingCountry',
  billing_email: 'billingEmail',
  buyer_reference: 'buyerReference',
  wants_e_invoice: 'wantsEInvoice',
} as const;

const BOTH_SPELLINGS = 'giving both spellings of one key with different values answers 422 conflicting_keys';

const text = (maxLength: number, description?: string) =>
  Type.String({ maxLength, ...(description ? { description } : {}) });
const billing = (maxLength: number, description?: string) =>
  Type.Union([text(maxLength), Type.Null()], description ? { description } : {});

const COUNTRY_RULE =
  'a two-letter code (any case) or a country name in English, German or another language the country list offers; stored as the upper-case two-letter code; a three-letter code, an unknown or an ambiguous name answers 422 reason invalid_country';
const EMAIL_RULE = 'an email address; another value answers 422 reason invalid_format';

/** Snake_case members, each with its rule; camelCase members are added from them below. */
const members = {
  contact_person: text(200),
  email: text(320, `${EMAIL_RULE}; empty clears it`),
  phone: text(100, 'plain text'),
  street: text(200),
  postal_code: text(20),
  city: text(200),
  country: text(100, `${COUNTRY_RULE}; empty clears it`),
  vat_id: text(50, 'spaces are removed and letters upper-cased'),
  billing_address_differs: Type.Boolean({
    description: 'turning it off keeps the billing fields; invoices then use the main address',
  }),
  billing_name: billing(200),
  billing_street: billing(200),
  billing_postal_code: billing(20),
  billing_city: billing(200),
  billing_country: billing(100, `${COUNTRY_RULE}; null or empty clears it`),
  billing_email: billing(320, `${EMAIL_RULE}; null or empty clears it`),
  buyer_reference: text(200, 'required for an electronic invoice (see wants_e_invoice), otherwise free'),
  wants_e_invoice: Type.Boolean({
    description: 'the partner wants electronic invoices: then buyer_reference is one of its gaps while empty',
  }),
};

/** The earlier spelling of a key: the same rule, plus the rule of giving both. */
function camelOf<T extends object>(schema: T, snake: string): T {
  const own = (schema as { description?: string }).description;
  const description = `earlier spelling of ${snake}${own ? `: ${own}` : ''}; ${BOTH_SPELLINGS}`;
  return { ...schema, description };
}

const Name = TitleName(
  200,
  'identifies the partner; a name another partner of the account has (in any case, retired ones too) answers 409 partner_name_taken',
);

/** A snake_case key that has a camelCase twin says so, with the rule of giving both. */
function withTwin<T extends object>(schema: T, snake: string): T {
  const camel = (PARTNER_KEY_SPELLINGS as Record<string, string>)[snake];
  if (!camel) return schema;
  const own = (schema as { description?: string }).description;
  return { ...schema, description: `${own ? `${own}; ` : ''}also spelled ${camel}; ${BOTH_SPELLINGS}` };
}

/** Every member optional, each camelCase spelling beside its snake_case key. */
const partnerBodyMembers = Object.fromEntries([
  ...Object.entries(members).map(([key, schema]) => [key, Type.Optional(withTwin(schema, key))]),
  ...Object.entries(PARTNER_KEY_SPELLINGS).map(([snake, camel]) => [
    camel,
    Type.Optional(camelOf(members[snake as keyof typeof members], snake)),
  ]),
]) as Record<string, TSchema>;

export const CreatePartnerBody = Type.Object(
  { name: Name, ...partnerBodyMembers },
  {
    additionalProperties: false,
    description: `Only name is required; keys are snake_case, and the earlier camelCase spelling is accepted too (${BOTH_SPELLINGS})`,
  },
);

export const UpdatePartnerBody = Type.Object(
  {
    name: Type.Optional(Name),
    ...partnerBodyMembers,
    retired: Type.Optional(
      Type.Boolean({ description: 'false brings a retired partner back; true retires it' }),
    ),
  },
  {
    additionalProperties: false,
    description: `A missing key stays as it is; keys as on creation (${BOTH_SPELLINGS})`,
  },
);

/** A body as the service reads it: either spelling of each key (the schema bounds the values). */
export type PartnerBody = { name?: string; retired?: boolean } & Record<string, unknown>;

export const PARTNER_GAPS = [
  'street',
  'postal_code',
  'city',
  'country',
  'email',
  'billing_street',
  'billing_postal_code',
  'billing_city',
  'billing_country',
  'billing_email',
  'buyer_reference',
] as const;

const NullableText = Type.Union([Type.String(), Type.Null()]);

export const Partner = Type.Object({
  id: Uuid,
  name: Type.String(),
  contact_person: Type.String(),
  email: Type.String(),
  phone: Type.String(),
  street: Type.String(),
  postal_code: Type.String(),
  city: Type.String(),
  country: Type.String({ description: 'two-letter code, or empty' }),
  vat_id: Type.String(),
  billing_address_differs: Type.Boolean(),
  billing_name: NullableText,
  billing_street: NullableText,
  billing_postal_code: NullableText,
  billing_city: NullableText,
  billing_country: NullableText,
  billing_email: NullableText,
  buyer_reference: Type.String(),
  wants_e_invoice: Type.Boolean(),
  portal_right_contact: Type.String({ description: 'portal right of the contact, e.g. `view`' }),
  portal_right_billing: Type.String({ description: 'portal right of billing, e.g. `view`' }),
  retired: Type.Boolean(),
  gaps: Type.Array(Type.String({ enum: [...PARTNER_GAPS] }), {
    description:
      'what an invoice still misses at this partner: street, postal_code, city, country, email (the billing_ ones when billing_address_differs), buyer_reference when wants_e_invoice; empty when complete',
  }),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const PartnerList = Type.Object({
  partner: Type.Array(Partner, { description: 'retired partners are left out' }),
  next_cursor: NextCursor,
});

export const PartnerListQuery = Type.Object(
  {
    q: Type.Optional(
      Type.String({
        maxLength: 200,
        description:
          'search term over name, contact person, email and city (case-insensitive, a part suffices)',
      }),
    ),
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: MAX_PARTNERS_PER_PAGE, default: MAX_PARTNERS_PER_PAGE }),
    ),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
);

export const PartnerId = Type.Object({ id: Uuid });
export const RetiredPartner = Type.Object({ id: Uuid, retired: Type.Boolean() });

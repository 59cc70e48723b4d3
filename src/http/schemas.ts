import { Type } from 'typebox';
import { ERROR_CODES } from './errors.ts';

/** Shared pieces of route schemas. */

/** JSON Schema's `if`/`then`: `consequence` applies to a value that meets `condition`. */
export function ifThen(condition: object, consequence: object): { if: object; then: object } {
  // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword, never awaited
  return { if: condition, then: consequence };
}

export const Uuid = Type.String({ format: 'uuid' });
export const Timestamp = Type.String({ format: 'date-time' });

/** A timestamp in a query string (a filter's bound): ISO 8601 with an offset, at most 64 characters. */
export const QueryTimestamp = (description: string) =>
  Type.String({ format: 'date-time', maxLength: 64, description });

/** A time filter's bound in a query string: a date (YYYY-MM-DD, UTC) or a timestamp with an offset. */
export const QueryDateOrTimestamp = (description: string) =>
  Type.Union(
    [Type.String({ format: 'date', maxLength: 10 }), Type.String({ format: 'date-time', maxLength: 64 })],
    {
      description,
    },
  );
export const IdParams = Type.Object({ id: Uuid });

/**
 * The rule of a name people read as a title: at least one character other than a blank (space,
 * tab, line break, and every other character JavaScript's `\s` matches, which is what `trim`
 * removes) or an invisible format character (soft hyphen, zero-width space and joiners,
 * direction marks, word joiner and invisible operators, the byte-order mark), which show
 * nothing either. The error handler reads a failure of this pattern as reason `required`: a
 * name of blanks names nothing, as a missing one does (docs/decisions.md, HTTP conventions).
 */
export const NAME_PATTERN = '[^\\s\\u00AD\\u180E\\u200B-\\u200F\\u2060-\\u2064\\uFEFF]';
const NAME_RULE = 'at least one character other than a blank; blanks only answer 422 (reason required)';

/**
 * A name a person reads as a title (an account's, a key's, a user's, an entity's and its
 * fields' labels, pipelines and stages, sources, partners, automations, calendars, rules,
 * return reasons): at most `maxLength` characters, not empty and not all blanks. A blank name is refused, never
 * trimmed into another; blanks around other text stay as each module keeps them today.
 */
export const Name = (maxLength: number, description?: string) =>
  Type.String({
    // No minLength: the pattern refuses "" too, so an empty name reads `required` as a blank one does.
    maxLength,
    pattern: NAME_PATTERN,
    description: description ? `${description}; ${NAME_RULE}` : `A name: ${NAME_RULE}`,
  });

/**
 * Values under their field names, the names at most `maxName` characters. A `Type.Record` key
 * schema's maxLength is not applied by the validator (TypeBox writes `patternProperties`):
 * `propertyNames` is what bounds the names.
 */
export function FieldValues(maxName: number) {
  return Type.Record(Type.String({ maxLength: maxName }), Type.Unknown(), {
    maxProperties: 500,
    propertyNames: { maxLength: maxName },
  });
}

/**
 * An idempotency key (decisions §4): 1–255 printable characters (Unicode letters, marks, numbers,
 * punctuation, symbols and spaces; no control, format, unassigned or private-use character, no
 * line or paragraph separator); the empty string is refused too. A key outside this rule answers
 * 400 `invalid_idempotency_key` (the error handler maps a schema failure on a key to it), never 422.
 */
export const IDEMPOTENCY_KEY_PATTERN = '^[^\\p{C}\\p{Zl}\\p{Zp}]{1,255}$';
export const IdempotencyKey = Type.String({
  minLength: 1,
  maxLength: 255,
  pattern: IDEMPOTENCY_KEY_PATTERN,
  description:
    '1–255 printable characters, spaces included, compared exactly; another value (the empty one too) answers 400 invalid_idempotency_key',
});
/**
 * The `Idempotency-Key` header: the same rule in visible ASCII and spaces, since a header's other
 * bytes have no agreed encoding (RFC 9110 §5.5: opaque data); a key in other characters goes in
 * `meta.idempotency_key` (or a note's `idempotency_key`).
 */
export const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 255,
      pattern: '^[\\x20-\\x7e]{1,255}$',
      description:
        '1–255 visible ASCII characters and spaces (the header has no other encoding; other characters go in the body’s key); another value answers 400 invalid_idempotency_key',
    }),
  ),
});

/** S2 and operator error body: `{"error": code}`, plus members some codes carry. */
export const S2Error = Type.Object(
  {
    error: Type.String({ enum: ERROR_CODES }),
    details: Type.Optional(
      Type.Array(Type.Object({ key: Type.String(), reason: Type.String(), message: Type.String() })),
    ),
  },
  { additionalProperties: true, $id: 'S2Error' },
);

/** S1 error body (interface: S1 error body). */
export const S1Error = Type.Object(
  {
    status: Type.Literal('error'),
    message: Type.String(),
    errors: Type.Optional(Type.Record(Type.String(), Type.Array(Type.String()))),
  },
  { $id: 'S1Error' },
);

export const s2Errors = { '4xx': Type.Ref('S2Error'), '5xx': Type.Ref('S2Error') };
export const s1Errors = { '4xx': Type.Ref('S1Error'), '5xx': Type.Ref('S1Error') };

export const Warning = Type.Object({
  key: Type.String(),
  reason: Type.String(),
  message: Type.Optional(Type.String()),
});

/** A `next_cursor` as the service issued it; anything else answers 422 (key `cursor`). */
export const Cursor = Type.String({
  maxLength: 200,
  pattern: '^[A-Za-z0-9_-]*$',
  description: 'The next_cursor of the previous page, as given; another value answers 422',
});

/** Cursor pagination of every list endpoint but deliveries (decisions §6). */
export const PageQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
);

/**
 * The query of a list that answers everything at once (an account's entities, distributions,
 * return reasons: few by nature): it takes no parameter, and refuses any, as every list refuses
 * one it does not take (422 `unknown_key`).
 */
export const NoQuery = Type.Object({}, { additionalProperties: false });

/**
 * Whether a route whose schema names no query parameter refuses any (422 `unknown_key`): every
 * S2 route (`/api/v1/…`, `/admin/v1/…`) but a source's intake address, which landing pages tag
 * with `utm_…`. Pages people open and S1's routes keep taking any, as do routes hidden from the
 * API document (its own address among them).
 */
export function refusesAnyQuery(route: RouteShape) {
  return route.schema?.querystring === undefined && isS2Route(route);
}

/** What the two rules read of a route as it is added. */
interface RouteShape {
  url: string;
  method: string | string[];
  schema?: { querystring?: unknown; body?: unknown; hide?: boolean };
}

function isS2Route(route: RouteShape): boolean {
  if (route.schema?.hide || route.url.startsWith('/api/v1/in/')) return false;
  return route.url.startsWith('/api/v1/') || route.url.startsWith('/admin/v1/');
}

/**
 * Whether a route whose schema names no body refuses one with anything in it (validation.ts,
 * `refuseAnyBody`): every S2 route that writes or acts (POST, PUT, PATCH, DELETE) but the same
 * exceptions as for the query.
 */
export function refusesAnyBody(route: RouteShape) {
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  const acts = methods.some((method) => method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS');
  return acts && route.schema?.body === undefined && isS2Route(route);
}

export const NextCursor = Type.Union([Type.String(), Type.Null()]);

export function iso(value: Date | string): string {
  return (value instanceof Date ? value : new Date(value)).toISOString();
}

/** One attempt to send an outbound message (a webhook's or an automation's), as listings show it. */
export const MessageAttempt = Type.Object({
  id: Uuid,
  message_id: Uuid,
  event: Type.String(),
  attempt: Type.Integer(),
  outcome: Type.String({ enum: ['delivered', 'failed'] }),
  status_code: Type.Union([Type.Integer(), Type.Null()], {
    description: "The receiver's HTTP status (webhooks) or the SMTP server's reply code (email)",
  }),
  response: Type.Union([Type.String(), Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
  duration_ms: Type.Integer(),
  attempted_at: Timestamp,
});

export const MessageAttemptList = Type.Object({
  attempts: Type.Array(MessageAttempt),
  next_cursor: NextCursor,
});

import type { SwaggerOptions } from '@fastify/swagger';
import type { CredentialKind, RouteAuth } from './auth.ts';
import { ERROR_STATUS } from './errors.ts';
import { ifThen } from './schemas.ts';

/**
 * The OpenAPI document served at /api/v1/openapi.json (docs/decisions.md, "OpenAPI document"):
 * what @fastify/swagger makes of the route schemas, plus what no single route states: which
 * credential each operation takes, the rate-limit and request-id headers, and error bodies
 * typed per status.
 */

/** Each credential kind as a security requirement; a source token sits in the path instead. */
const SECURITY_BY_CREDENTIAL: Partial<Record<CredentialKind, string>> = {
  api_key: 'apiKey',
  admin: 'adminToken',
  record_token: 'recordToken',
  signed_url: 'signedAddress',
  session: 'sessionCookie',
};

/** Schemes whose requests count against the account's rate limit (decisions §9). */
const METERED_SCHEMES = new Set(['apiKey', 'recordToken', 'signedAddress', 'sessionCookie']);

const TAGS = [
  { name: 'Intake', description: 'Taking in records (S2): single, bulk, by source token; the intake log' },
  { name: 'Records', description: 'Reading and changing records; record tokens' },
  { name: 'Notes', description: 'Notes on existing records' },
  { name: 'Documents', description: 'Files attached to records, and their signed addresses' },
  { name: 'Entities', description: 'Entities and their fields, as integrations read them' },
  { name: 'CRM', description: 'Pipelines and stages (CRM module)' },
  {
    name: 'Booking',
    description: 'Appointments (booking module), and the public slots and booking of a booking link',
  },
  {
    name: 'Distribution',
    description: 'Partners, distribution runs, deliveries and returns (distribution module)',
  },
  { name: 'S1', description: 'The unversioned surface below /api' },
  { name: 'Settings: API keys', description: 'The account’s API keys' },
  { name: 'Settings: sources', description: 'Sources and their intake tokens' },
  { name: 'Settings: users', description: 'The account’s users (assignees and viewers)' },
  { name: 'Settings: entities', description: 'Entity definitions, duplicate rules and pipelines' },
  { name: 'Settings: booking', description: 'Calendars of the booking module' },
  { name: 'Settings: webhooks', description: 'Account webhooks, their test sends and attempts' },
  {
    name: 'Settings: distribution',
    description: 'Distribution setups, participations, rules and return reasons (distribution module)',
  },
  {
    name: 'Session',
    description:
      'Signing in and out of the console: the session cookie stands in for an API key, with the role in place of permissions',
  },
  { name: 'Operator', description: 'Accounts of the instance, with the operator token' },
  { name: 'System', description: 'Health of the service' },
];

const integerHeader = (description: string) => ({ description, schema: { type: 'integer', minimum: 0 } });

const HEADERS = {
  'X-Request-Id': {
    description: 'The request’s id: the caller’s when it sent a sane one, else a new one',
    schema: { type: 'string', maxLength: 128 },
  },
  'RateLimit-Limit': integerHeader('Requests a minute the account may make'),
  'RateLimit-Remaining': integerHeader('Requests left in the current window'),
  'RateLimit-Reset': integerHeader('Seconds until the allowance is full again'),
  'Retry-After': integerHeader('Seconds to wait before the next attempt'),
  'Idempotent-Replayed': {
    description: '`true` when this is the stored answer of an earlier request with the same idempotency key',
    schema: { type: 'string', enum: ['true'] },
  },
};

const headerRef = (name: keyof typeof HEADERS) => ({ $ref: `#/components/headers/${name}` });
const RATE_HEADERS = {
  'RateLimit-Limit': headerRef('RateLimit-Limit'),
  'RateLimit-Remaining': headerRef('RateLimit-Remaining'),
  'RateLimit-Reset': headerRef('RateLimit-Reset'),
};

const codesOf = (status: number) =>
  Object.entries(ERROR_STATUS)
    .filter(([, code]) => code === status)
    .map(([name]) => name);

const detailsSchema = {
  type: 'array',
  items: {
    type: 'object',
    required: ['key', 'reason', 'message'],
    properties: { key: { type: 'string' }, reason: { type: 'string' }, message: { type: 'string' } },
  },
};

/** S2 error bodies of one status, its codes taken from the closed list (http/errors.ts). */
function s2ErrorFor(status: number, extra: object = {}) {
  return {
    type: 'object',
    required: ['error'],
    properties: { error: { type: 'string', enum: codesOf(status) }, details: detailsSchema },
    additionalProperties: true,
    ...extra,
  };
}

const ERROR_SCHEMAS = {
  S2Unauthorized: s2ErrorFor(401),
  S2RateLimited: s2ErrorFor(429),
  S2BadRequest: s2ErrorFor(400),
  S2Unprocessable: s2ErrorFor(
    422,
    ifThen(
      { properties: { error: { const: 'validation_failed' } } },
      { required: ['details'], properties: { details: detailsSchema } },
    ),
  ),
};

/**
 * What every validated operation may refuse beside its schemas: text PostgreSQL cannot store,
 * anywhere in the request (decisions: HTTP conventions).
 */
export const UNPROCESSABLE =
  'The request has invalid values (details name them). Text holding the NUL character or an unpaired UTF-16 surrogate is refused wherever it appears (reason `invalid_characters`), and so is a JSON number beyond a double (reason `out_of_range`).';

/** Set by the transform on a route whose body may be left out (route config `bodyOptional`). */
const BODY_OPTIONAL = 'x-leadline-body-optional';

type Operation = {
  [BODY_OPTIONAL]?: boolean;
  security?: Record<string, string[]>[];
  parameters?: { in: string; name: string }[];
  requestBody?: unknown;
  responses: Record<string, { description: string; headers?: object; content?: object }>;
};

function errorResponse(description: string, schemaName: string, headers: object = {}) {
  return {
    description,
    headers,
    content: { 'application/json': { schema: { $ref: `#/components/schemas/${schemaName}` } } },
  };
}

/** The website-form door (decisions §13): a source token in the path, pages for browsers. */
const SOURCE_TOKEN_PATH = '/api/v1/in/';
const HTML_PAGE = {
  schema: {
    type: 'string',
    description:
      'For a browser (Accept preferring text/html) without success_url or error_url: a small page in English or German',
  },
};

/** Adds what every operation answers beside its own responses. */
function completeOperation(path: string, method: string, operation: Operation): void {
  const s1 = path.startsWith('/api/') && !path.startsWith('/api/v1');
  const schemes = (operation.security ?? []).flatMap((requirement) => Object.keys(requirement));
  // The preflight of a website form carries no credential (CORS never sends one).
  const tokenInPath = path.startsWith(SOURCE_TOKEN_PATH) && method !== 'options';
  const metered = schemes.some((scheme) => METERED_SCHEMES.has(scheme)) || tokenInPath;
  const authenticated = schemes.length > 0 || tokenInPath;
  const idempotent = (operation.parameters ?? []).some(
    (p) => p.in === 'header' && p.name.toLowerCase() === 'idempotency-key',
  );
  const validated = Boolean(operation.requestBody) || (operation.parameters ?? []).length > 0;
  const responses = operation.responses;
  const error = (status: string, description: string, s2Schema: string, headers: object = {}) => {
    responses[status] ??= errorResponse(description, s1 ? 'S1Error' : s2Schema, headers);
  };
  if (authenticated) error('401', 'Missing, unknown or revoked credential', 'S2Unauthorized');
  if (validated) {
    // A route's own 422 (a code beside validation_failed) still refuses what every route refuses.
    const own = responses['422'];
    if (own) own.description = `${UNPROCESSABLE} ${own.description ?? ''}`.trim();
    else error('422', UNPROCESSABLE, 'S2Unprocessable');
  }
  if (idempotent) error('400', 'The idempotency key is not 1–255 printable characters', 'S2BadRequest');
  if (metered) {
    error('429', 'Over the account’s rate limit', 'S2RateLimited', {
      'Retry-After': headerRef('Retry-After'),
    });
  }
  for (const [status, response] of Object.entries(responses)) {
    if (tokenInPath && response.content && 'application/json' in response.content) {
      response.content = { ...response.content, 'text/html': HTML_PAGE };
    }
    if (tokenInPath && status === '303') {
      response.headers = {
        Location: {
          description: 'The source’s success_url with ?id=<record id>, or its error_url with ?error=<code>',
          schema: { type: 'string', format: 'uri' },
        },
        ...response.headers,
      };
    }
    response.headers = {
      'X-Request-Id': headerRef('X-Request-Id'),
      ...(metered ? RATE_HEADERS : {}),
      ...(idempotent && status.startsWith('2')
        ? { 'Idempotent-Replayed': headerRef('Idempotent-Replayed') }
        : {}),
      ...response.headers,
    };
  }
}

/**
 * @fastify/swagger writes a `patternProperties` as `additionalProperties` (an OpenAPI 3.0
 * workaround), which would state that every other key follows the pattern's schema. The
 * keyword is hidden from it under this name and put back in the finished document (3.1 has it).
 */
const HIDDEN_PATTERN_PROPERTIES = 'x-leadline-pattern-properties';

/**
 * A copy of a schema with the keyword `from` renamed `to` wherever `applies` says so. A record
 * of free keys (TypeBox writes `patternProperties: {"^.*$": …}`) is left to the rewrite, which
 * says the same thing as `additionalProperties`.
 */
function renameKeyword(
  value: unknown,
  from: string,
  to: string,
  applies: (inner: unknown) => boolean = () => true,
): unknown {
  if (Array.isArray(value)) return value.map((item) => renameKeyword(item, from, to, applies));
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, inner]) => [
      key === from && applies(inner) ? to : key,
      renameKeyword(inner, from, to, applies),
    ]),
  );
}

const isCatchAll = (patterns: unknown) =>
  patterns !== null && typeof patterns === 'object' && Object.keys(patterns).every((p) => p === '^.*$');

/** `createRecord`-like names from the method and path, for an operation that names none. */
function derivedOperationId(method: string, url: string): string {
  const words = url
    .split('/')
    .filter((part) => part !== '')
    .map((part) => (part.startsWith(':') ? `by-${part.slice(1)}` : part))
    .join('-')
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean);
  return [method.toLowerCase(), ...words.map((w) => w[0]!.toUpperCase() + w.slice(1))].join('');
}

export function openapiOptions(): SwaggerOptions {
  return {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Leadline API',
        version: '1.0.0',
        description:
          'Lead intake and distribution. S1 (unversioned) below /api, S2 below /api/v1, the operator API below /admin/v1. The guide: [/docs/guide/README.md](/docs/guide/README.md) (in the repository: `docs/guide/`).',
        license: { name: 'MIT', identifier: 'MIT' },
      },
      servers: [{ url: '/', description: 'This instance (the address this document was read from)' }],
      tags: TAGS,
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', description: 'Account API key (lk_…), or the bare key' },
          adminToken: { type: 'http', scheme: 'bearer', description: 'Operator token (LEADS_ADMIN_TOKEN)' },
          recordToken: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'rt_…',
            description: 'Record token: names one record and the fields it opens',
          },
          sessionCookie: {
            type: 'apiKey',
            in: 'cookie',
            name: 'leads_session',
            description:
              'A signed-in person’s session (POST /api/v1/session), accepted wherever an API key is when no Authorization header is sent; the role decides what it may do. POST, PUT, PATCH and DELETE need the header X-CSRF-Token with the session’s csrf_token, else 403 csrf_failed',
          },
          signedAddress: {
            type: 'apiKey',
            in: 'query',
            name: 'sig',
            description:
              'Signature of a signed document address, sent with its `exp`; valid for that document for 30 minutes',
          },
        },
        headers: HEADERS,
        schemas: ERROR_SCHEMAS,
      } as never,
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, index) =>
        (json.$id as string | undefined) ?? `def-${index}`,
    },
    transform: ({ schema, url, route }) => {
      const auth = (route.config as { auth?: RouteAuth } | undefined)?.auth;
      // A route without credentials, or one whose credential is a path segment, needs no scheme.
      // Wherever an API key is taken, a session cookie is too (decisions §14).
      const kinds = auth?.accept ?? [];
      const accepted =
        kinds.includes('api_key') && !kinds.includes('session') ? [...kinds, 'session' as const] : kinds;
      const security = accepted
        .map((kind) => SECURITY_BY_CREDENTIAL[kind])
        .filter((name): name is string => name !== undefined)
        .map((name) => ({ [name]: [] }));
      // An optional credential: the empty requirement says the operation also takes none.
      if (auth?.optional) security.unshift({});
      const method = Array.isArray(route.method) ? route.method[0]! : route.method;
      const operationId =
        (schema as { operationId?: string } | undefined)?.operationId ?? derivedOperationId(method, url);
      const body = (schema as { body?: unknown } | undefined)?.body;
      const hidden =
        body !== undefined && JSON.stringify(body).includes('"patternProperties"')
          ? {
              body: renameKeyword(
                body,
                'patternProperties',
                HIDDEN_PATTERN_PROPERTIES,
                (patterns) => !isCatchAll(patterns),
              ),
            }
          : {};
      // Fastify's document marks every body required; transformObject below reads this mark.
      const optional = (route.config as { bodyOptional?: boolean } | undefined)?.bodyOptional
        ? { [BODY_OPTIONAL]: true }
        : {};
      return {
        schema: { ...schema, ...hidden, ...optional, security, operationId } as typeof schema,
        url,
      };
    },
    transformObject: (document) => {
      const openapiObject = (document as { openapiObject: { paths?: Record<string, object> } }).openapiObject;
      for (const [path, methods] of Object.entries(openapiObject.paths ?? {})) {
        for (const [method, operation] of Object.entries(methods as Record<string, Operation>)) {
          completeOperation(path, method, operation);
          if (operation[BODY_OPTIONAL]) {
            delete operation[BODY_OPTIONAL];
            operation.requestBody = { ...(operation.requestBody as object), required: false };
          }
          if (
            operation.requestBody !== undefined &&
            JSON.stringify(operation.requestBody).includes(HIDDEN_PATTERN_PROPERTIES)
          ) {
            (methods as Record<string, Operation>)[method] = {
              ...operation,
              requestBody: renameKeyword(
                operation.requestBody,
                HIDDEN_PATTERN_PROPERTIES,
                'patternProperties',
              ),
            };
          }
        }
      }
      return openapiObject as never;
    },
  };
}

import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, type ErrorCode, idempotencyKeyRefused, type ValidationDetail } from './errors.ts';
import { NAME_PATTERN } from './schemas.ts';

/** S1 is everything below /api that is not below /api/v1 (interface: Conventions). */
export function isS1Path(url: string): boolean {
  return url.startsWith('/api/') && !url.startsWith('/api/v1/') && url.split('?')[0] !== '/api/v1';
}

/** PostgreSQL and driver errors that mean the database cannot be reached right now. */
function isDatabaseUnavailable(error: unknown): boolean {
  const candidate = error as { code?: unknown; message?: unknown };
  const code = typeof candidate.code === 'string' ? candidate.code : '';
  if (
    ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', '57P01', '57P02', '57P03', '53300'].includes(code)
  ) {
    return true;
  }
  if (code.startsWith('08')) return true;
  const message = typeof candidate.message === 'string' ? candidate.message : '';
  return /Connection terminated|connection timeout|Client has encountered a connection error|timeout exceeded when trying to connect/i.test(
    message,
  );
}

export interface AjvError {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
  schemaPath?: string;
  /** The failing value; present where the validator runs verbose (typed JSON bodies). */
  data?: unknown;
  /** The key a `propertyNames` rule refused (its own errors carry it; the path is its object's). */
  propertyName?: string;
}

function jsonTypeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

/**
 * An `enum` or `const` failure whose value has none of the listed values' JSON types is a
 * wrong type (reason `invalid_type`), like a `type` failure: `42` where text is listed.
 */
function asTypeFailure(error: AjvError): AjvError {
  if (!('data' in error) || (error.keyword !== 'enum' && error.keyword !== 'const')) return error;
  const listed = error.keyword === 'enum' ? error.params?.allowedValues : [error.params?.allowedValue];
  if (!Array.isArray(listed)) return error;
  const types = new Set(listed.map(jsonTypeOf));
  if (types.has(jsonTypeOf(error.data))) return error;
  const type = [...types].join(' or ');
  return { ...error, keyword: 'type', params: { ...error.params, type }, message: `must be ${type}` };
}

/**
 * Ajv reports a failed `anyOf` as the errors of every branch followed by its own. One detail
 * says more: the branch that went deepest (the value had its shape but failed inside), or one
 * statement when every branch failed alike (the value's JSON type; a missing one of several keys).
 */
function collapseAlternatives(errors: AjvError[]): AjvError[] {
  const last = errors.at(-1);
  if (!last || (last.keyword !== 'anyOf' && last.keyword !== 'oneOf')) return errors;
  const at = last.instancePath ?? '';
  const branches = errors.slice(0, -1).filter((error) => (error.instancePath ?? '').startsWith(at));
  if (branches.length === 0) return [last];
  const deepest = branches.reduce((a, b) =>
    (b.instancePath ?? '').length > (a.instancePath ?? '').length ? b : a,
  );
  if ((deepest.instancePath ?? '') !== at) return [deepest];
  if (branches.every((error) => error.keyword === 'required')) {
    const names = branches.map((error) => String(error.params?.missingProperty));
    return [{ ...branches[0], message: `give ${[...new Set(names)].join(' or ')}` }];
  }
  // Every branch refused the value's JSON type (a branch may also report its enum after that).
  const branchOf = (error: AjvError) =>
    (error.schemaPath ?? '').slice((last.schemaPath ?? '').length).split('/')[1];
  const branchCount = new Set(branches.map(branchOf)).size;
  const typeFailures = branches.filter((error) => error.keyword === 'type');
  // The value had the JSON type of one branch only (an object where an object or null is
  // taken) and failed inside it at its own level (a missing key): that branch's failure.
  if (last.schemaPath !== undefined) {
    const mistyped = new Set(typeFailures.map(branchOf));
    const shaped = branches.filter((error) => !mistyped.has(branchOf(error)));
    if (shaped.length > 0 && new Set(shaped.map(branchOf)).size === 1 && mistyped.size === branchCount - 1) {
      return [shaped[0]!];
    }
  }
  if (
    typeFailures.length > 0 &&
    (last.schemaPath === undefined
      ? typeFailures.length === branches.length
      : new Set(typeFailures.map(branchOf)).size === branchCount)
  ) {
    const types = typeFailures.map((error) => String(error.params?.type));
    return [{ ...last, keyword: 'type', message: `must be ${[...new Set(types)].join(' or ')}` }];
  }
  // The value's JSON type fits one branch only (an object where text or an object is allowed):
  // that branch's own failure names what is wrong inside it (a missing key, say).
  if (last.schemaPath !== undefined) {
    const typeFailed = new Set(typeFailures.map(branchOf));
    const fitting = branches.filter((error) => !typeFailed.has(branchOf(error)));
    if (fitting.length > 0 && new Set(fitting.map(branchOf)).size === 1) return [fitting[0]!];
  }
  return [furthestTextFailure(branches) ?? last];
}

/** How far a text got through a branch: its length, then its pattern, then its format (Ajv's order). */
const TEXT_STEPS: Readonly<Record<string, number>> = { maxLength: 1, minLength: 1, pattern: 2, format: 3 };

/**
 * Text that every branch took as text but none as its form (`from=garbage` where a date or a
 * date-time is taken): the failure of the branch that got furthest (a format over a length), and
 * where several got as far, one detail naming each format they wanted (`must be a date
 * (YYYY-MM-DD) or a date-time with an offset (…)`) or the widest length bound. Undefined when
 * the branches failed otherwise. Before, such a value answered `not_allowed` with Ajv's `must
 * match a schema in anyOf`, which names neither what was wrong nor what is taken.
 */
function furthestTextFailure(branches: AjvError[]): AjvError | undefined {
  if (branches.length === 0 || !branches.every((error) => TEXT_STEPS[error.keyword ?? ''] !== undefined)) {
    return undefined;
  }
  const step = Math.max(...branches.map((error) => TEXT_STEPS[error.keyword!]!));
  const furthest = branches.filter((error) => TEXT_STEPS[error.keyword!] === step);
  const first = furthest[0]!;
  if (first.keyword === 'format') {
    const formats = [...new Set(furthest.map((error) => String(error.params?.format)))];
    return { ...first, params: { format: formats.join(' or ') }, message: formatMessage(formats) };
  }
  // Outside every branch's length: the most lenient bound of one kind is the one to meet.
  const limit = (error: AjvError) => Number(error.params?.limit);
  if (furthest.every((error) => error.keyword === 'maxLength')) {
    return furthest.reduce((a, b) => (limit(b) > limit(a) ? b : a));
  }
  if (furthest.every((error) => error.keyword === 'minLength')) {
    return furthest.reduce((a, b) => (limit(b) < limit(a) ? b : a));
  }
  return first;
}

/** What a format asks for, in words, where Ajv's `must match format "date-time"` says too little. */
const FORMAT_WORDS: Readonly<Record<string, string>> = {
  date: 'a date (YYYY-MM-DD)',
  'date-time': 'a date-time with an offset (2027-01-04T08:00:00Z or +01:00)',
};

function formatMessage(formats: readonly string[]): string {
  return `must be ${formats.map((format) => FORMAT_WORDS[format] ?? `in format "${format}"`).join(' or ')}`;
}

/** Details of schema failures, from Ajv's errors or TypeBox's (which name `requiredProperties`). */
export function detailsFromValidation(errors: AjvError[]): ValidationDetail[] {
  // An `if` only says that its `then` failed, and `propertyNames` that a name did: each failure
  // has its own error.
  const own = errors.filter((error) => error.keyword !== 'if' && error.keyword !== 'propertyNames');
  return collapseAlternatives(own.map(asTypeFailure)).map((error) => {
    const path = (error.instancePath ?? '').replace(/^\//, '').replaceAll('/', '.');
    const required = error.params?.requiredProperties;
    const missing = Array.isArray(required) ? required[0] : error.params?.missingProperty;
    // A refused name is the key itself, and what is wrong is the name, not its value; so is a
    // key the schema does not list.
    const named = error.propertyName;
    const unlisted = error.keyword === 'additionalProperties' ? error.params?.additionalProperty : undefined;
    const child = typeof missing === 'string' ? missing : typeof unlisted === 'string' ? unlisted : named;
    const key = child === undefined ? path || 'body' : path ? `${path}.${child}` : child;
    // A name of blanks only (the shared `Name`'s pattern) names nothing: reason `required`, as
    // the services that trim names said of it already (partners, rules, return reasons).
    const blank = error.keyword === 'pattern' && error.params?.pattern === NAME_PATTERN;
    const format = error.keyword === 'format' ? String(error.params?.format) : undefined;
    const message = blank
      ? 'must hold a character other than blanks'
      : format !== undefined && FORMAT_WORDS[format] !== undefined
        ? formatMessage([format])
        : unlisted !== undefined
          ? 'is not a key of this object'
          : named === undefined
            ? error.message
            : `the name ${error.message ?? 'is not allowed'}`;
    let reason = 'invalid_value';
    if (error.keyword === 'required' || blank) reason = 'required';
    else if (error.keyword === 'type') reason = 'invalid_type';
    else if (error.keyword === 'format' || error.keyword === 'pattern') reason = 'invalid_format';
    else if (['enum', 'const', 'anyOf', 'not'].includes(error.keyword ?? '')) reason = 'not_allowed';
    else if (error.keyword === 'additionalProperties') reason = 'unknown_key';
    else if (error.keyword === 'uniqueItems') reason = 'duplicate';
    else if (
      [
        'maxLength',
        'minLength',
        'maxItems',
        'minItems',
        'maximum',
        'minimum',
        'maxProperties',
        'minProperties',
      ].includes(error.keyword ?? '')
    ) {
      reason = 'out_of_range';
    }
    return { key, reason, message: message ?? reason };
  });
}

/**
 * Where an idempotency key sits: the header, `meta.idempotency_key` (in a form
 * `meta[idempotency_key]`), or a note's `idempotency_key`.
 */
export function isIdempotencyKeyPath(instancePath: string | undefined): boolean {
  return /^\/(idempotency-key|meta\/idempotency_key|meta\[idempotency_key\]|idempotency_key)$/.test(
    instancePath ?? '',
  );
}

/** The answer to a schema failure: 422 with details, or 400 for an idempotency key (decisions §4). */
export function validationError(errors: AjvError[]): AppError {
  if (errors.some((e) => isIdempotencyKeyPath(e.instancePath))) return idempotencyKeyRefused();
  return new AppError('validation_failed', { details: detailsFromValidation(errors) });
}

/** Refusals of a body, which an address that no route serves answers as 404 instead. */
const BODY_REFUSALS: ReadonlySet<ErrorCode> = new Set([
  'invalid_body',
  'unsupported_media_type',
  'payload_too_large',
]);

/** The answer of an address no route serves: S1's `not_found`, else `unknown_endpoint`. */
function notFoundAt(url: string): AppError {
  const code: ErrorCode = isS1Path(url) ? 'not_found' : 'unknown_endpoint';
  return new AppError(code, { message: 'No route at that address' });
}

/** Path parameters that name a resource: a uuid, an entity's key (settings and distribution setup). */
export const RESOURCE_PARAMS: ReadonlySet<string> = new Set(['id', 'key', 'entity_key']);

/** Maps whatever was thrown to the one AppError the client will see. */
export function toAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  const fastifyError = error as FastifyError & { validation?: AjvError[]; validationContext?: string };
  if (fastifyError.validation) {
    // A malformed id or entity key in the path names no resource: that is a 404, not a validation error.
    if (
      fastifyError.validationContext === 'params' &&
      fastifyError.validation.some((e) => RESOURCE_PARAMS.has((e.instancePath ?? '').slice(1)))
    ) {
      return new AppError('not_found');
    }
    return validationError(fastifyError.validation);
  }
  const status = fastifyError.statusCode;
  if (status === 413) return new AppError('payload_too_large');
  if (status === 415) return new AppError('unsupported_media_type');
  if (status === 429) return new AppError('rate_limited');
  if (status === 404) return new AppError('not_found');
  if (status === 405) return new AppError('method_not_allowed');
  if (status === 400) return new AppError('invalid_body');
  // Fastify answers requests that arrive while the server is closing with 503.
  if (status === 503) return new AppError('service_unavailable', { headers: { connection: 'close' } });
  if (isDatabaseUnavailable(error))
    return new AppError('service_unavailable', { headers: { 'retry-after': '1' } });
  return new AppError('internal_error', { cause: error });
}

/** The S2 body: `{"error": code}` plus the code's own members (interface: S2 error body). */
export function s2Body(error: AppError): Record<string, unknown> {
  const body: Record<string, unknown> = { error: error.code };
  if (error.details) body.details = error.details;
  if (error.extra) Object.assign(body, error.extra);
  return body;
}

/** The S1 body: `status`, `message`, and `errors` (field → messages) for validation. */
export function s1Body(error: AppError): Record<string, unknown> {
  const body: Record<string, unknown> = { status: 'error', message: error.message };
  if (error.details) {
    const errors: Record<string, string[]> = Object.create(null);
    for (const detail of error.details) {
      errors[detail.key] ??= [];
      errors[detail.key]!.push(detail.message);
    }
    body.errors = { ...errors };
  }
  return body;
}

export function sendError(request: FastifyRequest, reply: FastifyReply, error: AppError): FastifyReply {
  if (error.headers) reply.headers(error.headers);
  const body = isS1Path(request.url) ? s1Body(error) : s2Body(error);
  return reply.code(error.status).type('application/json; charset=utf-8').send(body);
}

export interface ErrorHandlingOptions {
  /** Whether an API key taken from memory (credential.checked false) is still live. */
  checkApiKey?: (accountId: string, keyId: string) => Promise<boolean>;
  /**
   * The answer for a browser where a route speaks to one (website forms, decisions §13): a
   * page or a redirect in place of the JSON body; null to answer JSON.
   */
  answerInPage?: (request: FastifyRequest, reply: FastifyReply, error: AppError) => FastifyReply | null;
  /** The web console's pages: an address no route has that a browser opens is a console page. */
  consolePage?: {
    answersPage(request: FastifyRequest): boolean;
    sendPage(reply: FastifyReply): Promise<FastifyReply>;
  };
}

export function registerErrorHandling(app: FastifyInstance, options: ErrorHandlingOptions = {}): void {
  app.setErrorHandler(async (error, request, reply) => {
    let appError = toAppError(error);
    // An address no route serves is 404 (interface: unknown_endpoint), whatever its body was:
    // Fastify reads the body of such a request too, and a body it cannot read says nothing.
    if (request.is404 && BODY_REFUSALS.has(appError.code)) appError = notFoundAt(request.url);
    const credential = request.credential;
    if (
      credential?.kind === 'api_key' &&
      !credential.checked &&
      appError.code !== 'unauthorized' &&
      options.checkApiKey
    ) {
      // A key taken from memory has not been checked yet: a revoked one gets 401, whatever
      // else was wrong with the request (a failed check leaves the error as it was).
      const live = await options.checkApiKey(credential.account.id, credential.keyId).catch(() => true);
      credential.checked = true;
      if (!live) appError = new AppError('unauthorized');
    }
    if (appError.status >= 500) {
      request.log.error({ err: error, code: appError.code }, 'request failed');
    } else if (appError.code === 'internal_error') {
      request.log.error({ err: error }, 'unexpected error');
    }
    return options.answerInPage?.(request, reply, appError) ?? sendError(request, reply, appError);
  });
  app.setNotFoundHandler((request, reply) => {
    if (options.consolePage?.answersPage(request)) return options.consolePage.sendPage(reply);
    return sendError(request, reply, notFoundAt(request.url));
  });
}

import { AjvCompiler } from '@fastify/ajv-compiler';
import type { FastifyBodyParser, FastifyInstance, FastifyRequest, FastifyServerOptions } from 'fastify';
import { jsonTextIsStorable } from './body-limits.ts';
import { type AjvError, validationError } from './error-handler.ts';
import { AppError, validationFailed } from './errors.ts';

/**
 * Request validation with types that mean what they say (HTTP conventions in docs/decisions.md):
 * a JSON body is typed, so a value of the wrong JSON type is refused (422 `invalid_type`)
 * instead of converted; a form body, a query string, path parameters and headers carry only
 * text, so those keep Ajv's conversion of text to numbers and booleans.
 */

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route also takes `application/x-www-form-urlencoded` (the intake routes only). */
    acceptsForm?: boolean;
    /** The route also takes `multipart/form-data` (source-token intake only, decisions §13). */
    acceptsMultipart?: boolean;
    /**
     * Every key of the body is optional, so a request may also send none (no body, no
     * content type): it is then read as `{}`. The document marks the body as not required.
     */
    bodyOptional?: boolean;
  }
}

const FORM = 'application/x-www-form-urlencoded';
const MULTIPART = 'multipart/form-data';
const FORM_ENCODINGS = new Set([FORM, MULTIPART]);

/**
 * A form body on a route that does not list that encoding answers 415 before it is read: the
 * document lists forms only on the intake routes, multipart only on source-token intake
 * (decisions: HTTP conventions, §13).
 */
export function refuseUnlistedForm(request: FastifyRequest): void {
  // An address without a route stays 404, whatever its body.
  if (request.routeOptions.url === undefined) return;
  const config = request.routeOptions.config;
  if (
    (request.mediaType === FORM && config?.acceptsForm !== true) ||
    (request.mediaType === MULTIPART && config?.acceptsMultipart !== true)
  ) {
    throw new AppError('unsupported_media_type');
  }
}

/**
 * A body in a content coding (gzip, br, …) answers 415 before it is read: the service decodes
 * none, and would otherwise read the coded bytes as the body, or a plain body that claims a
 * coding as plain (RFC 9110 §8.4 names 415 for an unsupported coding). `identity` is no coding.
 */
export function refuseContentCoding(request: FastifyRequest): void {
  if (request.routeOptions.url === undefined) return;
  const coding = request.headers['content-encoding'];
  if (coding === undefined || coding.trim() === '' || coding.trim().toLowerCase() === 'identity') return;
  throw new AppError('unsupported_media_type', {
    message: `Content-Encoding ${coding.slice(0, 50)} is not taken: send the body uncoded`,
  });
}

/**
 * A route whose body schema is given per media type is not validated when the request has no
 * body at all (Fastify picks the schema by content type): such a request is refused here.
 */
export async function requireBody(request: FastifyRequest): Promise<void> {
  if (request.body === undefined || request.body === null) {
    throw validationFailed([{ key: 'body', reason: 'required', message: 'a JSON or form body is required' }]);
  }
}

/**
 * The JSON body parser: Fastify's own, but an empty body on a route that takes none (no body
 * schema: a DELETE, `POST …/test`) is read as no body, whatever its Content-Type, since many
 * clients label every request `application/json`. A route that takes a body still answers an
 * empty one 400 `invalid_body` (docs/decisions.md, HTTP conventions).
 */
export function jsonBodyParser(parse: FastifyBodyParser<string>): FastifyBodyParser<string> {
  return function parseJson(this: FastifyInstance, request, body, done) {
    if (body.length === 0 && request.routeOptions.schema?.body === undefined) {
      done(null, undefined);
      return;
    }
    // The text is at hand here only: one scan of it spares the edge check a test of each string.
    request.jsonTextStorable = jsonTextIsStorable(body);
    return parse.call(this, request, body, done);
  };
}

/** Bodies read from a form encoding; only these are converted by the body validator. */
const formBodies = new WeakSet<object>();

/**
 * Readies a parsed body for validation: a form body is marked, so that its text values are
 * converted; a request without a body, on a route whose body keys are all optional, is read as
 * sending `{}`.
 */
export function settleBody(request: FastifyRequest): void {
  const body = request.body;
  if (body !== null && typeof body === 'object' && FORM_ENCODINGS.has(request.mediaType ?? '')) {
    formBodies.add(body);
  } else if (body === undefined && request.routeOptions.config?.bodyOptional === true) {
    request.body = {};
  }
}

type Validate = ((data: unknown, context?: unknown) => boolean) & { errors?: unknown; schemaEnv?: unknown };

/** The body validator: strict for JSON, converting for a marked form body. */
function typedBody(strict: Validate, converting: Validate): Validate {
  const validate: Validate = (data, context) => {
    const chosen = data !== null && typeof data === 'object' && formBodies.has(data) ? converting : strict;
    const valid = chosen(data, context);
    validate.errors = chosen.errors;
    return valid;
  };
  // Fastify hands Ajv the parent object (for a root value Ajv replaces) when it sees this.
  validate.schemaEnv = strict.schemaEnv;
  return validate;
}

/**
 * A validator compiled on its first use instead of at start: a route's validators take memory
 * (Ajv's generated code and what V8 makes of it) that most of the 100-odd routes, and the form
 * variant of every JSON body, never need in a given process. Fastify only checks that
 * `schemaEnv` is present (to hand Ajv the parent object); every Ajv validator has one.
 */
function compiledOnFirstUse(compile: () => Validate): Validate {
  let compiled: Validate | undefined;
  const validate: Validate = (data, context) => {
    compiled ??= compile();
    const valid = compiled(data, context);
    validate.errors = compiled.errors;
    return valid;
  };
  validate.schemaEnv = true;
  return validate;
}

interface RouteSchema {
  schema: unknown;
  httpPart?: string;
}
type Compile = (route: RouteSchema) => Validate;
type BuildCompiler = (externalSchemas: unknown, options: { customOptions?: object }) => Compile;

// The pool's declared types describe Ajv's own compile; at run time it takes a route's schema
// definition, as Fastify's schema controller calls it.
const buildAjv = AjvCompiler() as unknown as BuildCompiler;

/** `schemaController.compilersFactory.buildValidator` with the rule above. */
export function buildTypedValidator(externalSchemas: unknown, options: { customOptions?: object }): Compile {
  const converting = buildAjv(externalSchemas, options);
  const strict = buildAjv(externalSchemas, {
    ...options,
    // Verbose errors carry the failing value, so that an enum refusing `42` reads as a wrong type.
    customOptions: { ...options.customOptions, coerceTypes: false, verbose: true },
  });
  return (route) =>
    route.httpPart === 'body'
      ? typedBody(
          compiledOnFirstUse(() => strict(route)),
          compiledOnFirstUse(() => converting(route)),
        )
      : compiledOnFirstUse(() => converting(route));
}

/** The same factory typed as Fastify's server option expects it. */
export const typedValidatorFactory = buildTypedValidator as unknown as NonNullable<
  NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildValidator']
>;

const jsonCompile = buildTypedValidator({}, { customOptions: { allErrors: false, removeAdditional: false } });

/**
 * Checks a JSON value inside a body against its schema, as the body validator would (typed,
 * never converted): for the entries of a bulk call, each of which is refused on its own.
 */
export function jsonChecker(schema: object): (value: unknown) => AppError | null {
  const validate = jsonCompile({ schema, httpPart: 'body' });
  return (value) => (validate(value) ? null : validationError((validate.errors ?? []) as AjvError[]));
}

/**
 * A route that takes no body (no body schema: a DELETE, `POST …/test`, a token rotation) refuses
 * one that holds anything rather than ignoring it: none, an empty one or `{}` is no body; keys
 * are 422 `unknown_key` each, any other JSON (an array, a string) 422 `invalid_type` at `body`
 * (docs/decisions.md, HTTP conventions). Without a body schema the route stays one that takes
 * no body, so an empty body labelled JSON is none and the document shows no body.
 */
export async function refuseAnyBody(request: FastifyRequest): Promise<void> {
  const body = request.body;
  if (body === undefined || body === null) return;
  const message = 'this request takes no body';
  if (typeof body !== 'object' || Array.isArray(body)) {
    throw validationFailed([{ key: 'body', reason: 'invalid_type', message }]);
  }
  const keys = Object.keys(body);
  if (keys.length > 0) throw validationFailed(keys.map((key) => ({ key, reason: 'unknown_key', message })));
}

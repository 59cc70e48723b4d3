import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers/app.ts';
import {
  ContractChecker,
  documentAjv,
  type JsonSchema,
  mediaTypeMatches,
  type OpenApiDoc,
  type OpenApiOperation,
} from '../helpers/contract.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { type Mutation, SchemaArbitraries } from './schema-arbitrary.ts';
import { createWorld, type FileServer, startFileServer, stateDigester, type World } from './world.ts';

/**
 * The OpenAPI document the service serves and the service itself, kept in step. For every
 * operation of the document, in a world of its own (an account with every module, an entity
 * with a pipeline and typed fields, a record with a document, a source, a record token, a
 * user), requests are generated from the operation's own schemas:
 *
 * - Valid requests (fast-check, fixed seed, VALID_RUNS each). The answer must match the
 *   document (status documented, content type listed, body valid) and never be a 5xx. A
 *   refusal must follow from the state of the data, not from the request's shape:
 *   404 when the request names something that does not exist (a generated id or value, or a
 *   resource an earlier request of the same world deleted); 409 (a name taken, a key in use,
 *   several matches); 422 `idempotency_key_reused` for a repeated key; 422
 *   `validation_failed` only when every key it names is either a field of the account's entity
 *   given where the document leaves keys free (field values against the entity definition,
 *   which the entity listing publishes), or a location whose schema carries a `description`
 *   (the document states a rule in words there). Any other refusal of a schema-valid request
 *   (400, 401 with valid credentials, 403 with every module and permission, 413, 415, 422 on a
 *   declared key) is a rule the document does not state.
 * - Invalid requests, each breaking exactly one rule the document states (a required property
 *   or parameter missing, a value of the wrong JSON type, a length, bound, item count, enum,
 *   pattern or format broken, an undeclared property where the schema closes the object), built
 *   from a valid request with every optional part present. The answer must be 400 or 422 (404
 *   for a malformed path parameter), never 2xx; a 422 must name the broken location, with the
 *   reason `invalid_type` for a wrong JSON type in a body; nothing may be written.
 * - Media types: a body in a media type the operation does not list answers 415; where the
 *   document lists form encoding, generated bodies are also sent that way.
 * - Credentials: an operation that declares `security` answers 401 without them; one that
 *   declares none must not ask for any.
 *
 * Failures are collected over all operations and reported together at the end, each with the
 * request, the answer, the broken expectation and the seed to replay it.
 */

const SEED = Number(process.env.CONTRACT_SEED ?? 20_260_501);
const VALID_RUNS = Number(process.env.CONTRACT_RUNS ?? 100);
const TEXT_LIMIT = 400;
/** Logs each operation as it starts and how long it took, to find a slow or stuck one. */
const TRACE = process.env.CONTRACT_TRACE === '1';
/** Only the operations whose `METHOD /path` contains this text (to replay one quickly). */
const ONLY = process.env.CONTRACT_ONLY;
/** Accepted valid requests kept as bases for breaking rules. */
const MAX_BASES = 5;

interface Operation {
  method: string;
  path: string;
  spec: OpenApiOperation;
  /** Path, query, header and body as one JSON Schema, so one walk generates and breaks them. */
  requestSchema: JsonSchema;
  bodyMediaType: string | undefined;
}

interface GeneratedRequest {
  path: Record<string, unknown>;
  query: Record<string, unknown>;
  header: Record<string, unknown>;
  body?: unknown;
}

interface Failure {
  operation: string;
  check: string;
  problem: string;
  request: string;
  answer: string;
  replay: string;
}

const PARAMETER_LOCATIONS = ['path', 'query', 'header'] as const;

function operationsOf(doc: OpenApiDoc): Operation[] {
  const operations: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, spec] of Object.entries(methods)) {
      const properties: Record<string, JsonSchema> = {};
      for (const location of PARAMETER_LOCATIONS) {
        const parameters = (spec.parameters ?? []).filter((p) => p.in === location);
        properties[location] = {
          type: 'object',
          properties: Object.fromEntries(
            // The document carries a parameter's words on the parameter, not on its schema.
            parameters.map((p) => [
              location === 'header' ? p.name.toLowerCase() : p.name,
              p.description === undefined ? p.schema : { ...p.schema, description: p.description },
            ]),
          ),
          required: parameters
            .filter((p) => p.required || location === 'path')
            .map((p) => (location === 'header' ? p.name.toLowerCase() : p.name)),
          additionalProperties: false,
        };
      }
      const content = spec.requestBody?.content ?? {};
      const bodyMediaType =
        Object.keys(content).find((type) => mediaTypeMatches(type, 'application/json')) ??
        Object.keys(content)[0];
      if (bodyMediaType) properties.body = content[bodyMediaType]?.schema ?? {};
      operations.push({
        method: method.toUpperCase(),
        path,
        spec,
        bodyMediaType,
        requestSchema: {
          type: 'object',
          properties,
          required: [...PARAMETER_LOCATIONS, ...(spec.requestBody?.required ? ['body'] : [])],
          additionalProperties: false,
        },
      });
    }
  }
  return operations;
}

function clip(text: string): string {
  return text.length > TEXT_LIMIT ? `${text.slice(0, TEXT_LIMIT)}…` : text;
}

/** A stable per-operation seed derived from the run's seed. */
function seedFor(operation: Operation): number {
  let hash = SEED | 0;
  for (const char of `${operation.method} ${operation.path}`)
    hash = (Math.imul(hash, 31) + char.charCodeAt(0)) | 0;
  return hash;
}

function errorBodyOf(response: LightMyRequestResponse): {
  code: string | undefined;
  keys: { key: string; reason: string | undefined }[];
} {
  let body: any;
  try {
    body = JSON.parse(response.body);
  } catch {
    return { code: undefined, keys: [] };
  }
  if (Array.isArray(body?.details)) {
    return {
      code: body.error,
      keys: body.details.map((d: any) => ({ key: String(d.key), reason: d.reason })),
    };
  }
  if (body?.errors && typeof body.errors === 'object') {
    return { code: body.error, keys: Object.keys(body.errors).map((key) => ({ key, reason: undefined })) };
  }
  return { code: body?.error ?? s1CodeOf(body), keys: [] };
}

/** An S1 error body carries no code; its message is the code's words unless the code has its own. */
function s1CodeOf(body: any): string | undefined {
  return body?.status === 'error' && typeof body.message === 'string'
    ? body.message.replaceAll(' ', '_')
    : undefined;
}

describe.each(TEST_DATABASES)('the OpenAPI document and the service on %s', (kind) => {
  let t: TestApp;
  let files: FileServer;
  let doc: OpenApiDoc;
  let checker: ContractChecker;
  let digestOf: (accountId: string) => Promise<string>;
  let requestsSent = 0;
  const summaries: string[] = [];

  beforeAll(async () => {
    // A job queue as every serve process has (an entity change enqueues its recompute), not
    // worked: background work would change an account's state behind the digests below.
    t = await startTestApp(kind, { queue: { work: false } });
    files = await startFileServer();
    doc = t.app.swagger() as unknown as OpenApiDoc;
    checker = new ContractChecker(doc);
    digestOf = await stateDigester(t);
  });
  afterAll(async () => {
    await files?.close();
    await t?.close();
  });

  it('agree on every operation, for valid requests and for requests that break one stated rule', async () => {
    const all = operationsOf(doc);
    expect(all.length).toBeGreaterThan(10);
    const operations = ONLY ? all.filter((o) => `${o.method} ${o.path}`.includes(ONLY)) : all;
    const failures: Failure[] = [];
    const started = Date.now();
    for (const operation of operations) {
      const operationStarted = Date.now();
      if (TRACE) console.info(`contract: ${operation.method} ${operation.path} …`);
      try {
        await checkOperation(operation, failures);
        if (TRACE)
          console.info(`contract: ${operation.method} ${operation.path} ${Date.now() - operationStarted} ms`);
      } catch (error) {
        failures.push({
          operation: `${operation.method} ${operation.path}`,
          check: 'harness',
          problem: `the operation could not be checked: ${(error as Error).stack ?? error}`,
          request: '',
          answer: '',
          replay: `CONTRACT_SEED=${SEED}`,
        });
      }
    }
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    console.info(
      `OpenAPI contract on ${kind}: ${operations.length} operations, ${requestsSent} generated requests in ${seconds} s\n${summaries.join('\n')}`,
    );
    if (failures.length > 0) throw new Error(report(failures, operations.length, seconds));
  }, 300_000);

  function report(failures: Failure[], operationCount: number, seconds: string): string {
    const groups = new Map<string, { first: Failure; count: number }>();
    for (const failure of failures) {
      const key = `${failure.operation}\u0000${failure.check}\u0000${failure.problem}`;
      const group = groups.get(key);
      if (group) group.count++;
      else groups.set(key, { first: failure, count: 1 });
    }
    const lines = [
      `${groups.size} distinct contract failures (${failures.length} requests) over ${operationCount} operations on ${kind} in ${seconds} s, seed ${SEED}:`,
    ];
    for (const { first, count } of groups.values()) {
      lines.push(
        '',
        `✗ ${first.operation} [${first.check}] ${first.problem}${count > 1 ? ` (${count} requests)` : ''}`,
        `  request: ${first.request}`,
        `  answer:  ${first.answer}`,
        `  replay:  ${first.replay}`,
      );
    }
    return lines.join('\n');
  }

  async function checkOperation(operation: Operation, failures: Failure[]): Promise<void> {
    const name = `${operation.method} ${operation.path}`;
    const world = await createWorld(t, files);
    const ajv = documentAjv(doc);
    const generator = new SchemaArbitraries(ajv, doc.components?.schemas ?? {}, world.hints);
    const gone = new Set<string>();
    const seed = seedFor(operation);

    const credential = credentialFor(operation, world);
    if (typeof credential === 'object' && 'unknownScheme' in credential) {
      failures.push({
        operation: name,
        check: 'security',
        problem: `security scheme ${credential.unknownScheme} is not one the test knows how to satisfy`,
        request: '',
        answer: '',
        replay: '',
      });
      return;
    }

    // Path parameters name the world's real resources where the path says which kind; others
    // are generated from their schema (and may name nothing: 404).
    const fixed: Record<string, fc.Arbitrary<unknown>> = {};
    const segments = operation.path.split('/');
    for (const parameter of (operation.spec.parameters ?? []).filter((p) => p.in === 'path')) {
      const index = segments.indexOf(`{${parameter.name}}`);
      const kind = segments[index - 1] ?? '';
      // `kind:name` where one kind of segment names different things (a setup by entity key, a run by id).
      const real =
        parameter.name === 'token'
          ? world.sourceToken
          : (world.ids[`${kind}:${parameter.name}`] ?? world.ids[kind] ?? undefined);
      if (real !== undefined) fixed[`path.${parameter.name}`] = fc.constant(real);
    }
    const generatedPath = (operation.spec.parameters ?? []).some(
      (p) => p.in === 'path' && !fixed[`path.${p.name}`],
    );

    const send = async (
      request: GeneratedRequest,
      options: {
        withCredential?: boolean;
        mediaType?: string;
        session?: { cookie: string; csrf: string };
      } = {},
    ) => {
      let url = operation.path.replace(/\{([^}]+)\}/g, (_, key: string) =>
        encodeURIComponent(String(request.path[key] ?? '')),
      );
      const query = new URLSearchParams();
      for (const [key, value] of Object.entries(request.query)) {
        for (const item of Array.isArray(value) ? value : [value]) query.append(key, String(item));
      }
      if (query.size > 0) url += `?${query}`;
      const headers: Record<string, string> = { accept: 'application/json' };
      for (const [key, value] of Object.entries(request.header)) headers[key] = String(value);
      if (options.withCredential !== false && typeof credential === 'string') {
        headers.authorization = `Bearer ${credential}`;
      }
      if (options.withCredential !== false && credential === SESSION) {
        // A fresh session for each request: signing out ends the one it is sent with.
        const session = options.session ?? (await world.session());
        headers.cookie = `leads_session=${session.cookie}`;
        headers['x-csrf-token'] = session.csrf;
      }
      const inject: InjectOptions = { method: operation.method as InjectOptions['method'], url, headers };
      // Sign-in counts failures per client address, and the public booking JSON requests: each
      // such request comes from an address of its own.
      if (PER_ADDRESS_LIMITED.some((prefix) => operation.path.startsWith(prefix))) {
        inject.remoteAddress = randomAddress();
      }
      let shown = '';
      if (request.body !== undefined) {
        const mediaType = options.mediaType ?? 'application/json';
        headers['content-type'] = mediaType;
        if (mediaType === 'application/x-www-form-urlencoded') inject.payload = toForm(request.body) ?? '';
        else if (mediaType === 'application/json') inject.payload = JSON.stringify(request.body);
        else inject.payload = typeof request.body === 'string' ? request.body : JSON.stringify(request.body);
        shown = ` ${mediaType} ${clip(String(inject.payload))}`;
      }
      const response = await t.app.inject(inject);
      requestsSent++;
      const shownHeaders = Object.entries(request.header)
        .map(([key, value]) => `${key}: ${JSON.stringify(value)}`)
        .join(', ');
      return {
        response,
        url,
        shownRequest: `${operation.method} ${url}${shownHeaders ? ` [${shownHeaders}]` : ''}${shown}`,
        shownAnswer: `${response.statusCode} ${response.headers['content-type'] ?? ''} ${clip(response.body)}`,
      };
    };

    const fail = (
      check: string,
      problem: string,
      sent: { shownRequest: string; shownAnswer: string },
      replay: string,
    ) =>
      failures.push({
        operation: name,
        check,
        problem,
        request: sent.shownRequest,
        answer: sent.shownAnswer,
        replay,
      });

    const documentProblem = (sent: Awaited<ReturnType<typeof send>>) =>
      checker.problem(operation.method, sent.url, sent.response);

    // Valid requests.
    const validArbitrary = generator.arbitrary(operation.requestSchema, { fixed, headerPrefix: 'header' });
    const formDocumented = Object.keys(operation.spec.requestBody?.content ?? {}).some((type) =>
      mediaTypeMatches(type, 'application/x-www-form-urlencoded'),
    );
    const statuses = new Map<string, number>();
    /** Why valid requests were refused, to see how much of each operation's happy path is reached. */
    const refusals = new Map<string, number>();
    const accepted: GeneratedRequest[] = [];
    let unauthorizedWithoutSecurity = 0;
    const sendValid = async (
      request: GeneratedRequest,
      check: string,
      replay: string,
      mediaType?: string,
    ) => {
      const sent = await send(mediaType ? { ...request, body: formValues(request.body) } : request, {
        mediaType,
      });
      const status = sent.response.statusCode;
      statuses.set(String(status), (statuses.get(String(status)) ?? 0) + 1);
      if (status >= 400) {
        const { code, keys } = errorBodyOf(sent.response);
        const why = `${status} ${code ?? ''} ${keys.map((k) => `${k.key.replace(/\.\d+(?=\.|$)/g, '.*')}${k.reason ? `:${k.reason}` : ''}`).join(',')}`;
        refusals.set(why, (refusals.get(why) ?? 0) + 1);
      }
      const documented = documentProblem(sent);
      const problems = documented
        ? [documented]
        : validRefusals(operation, request, sent, world, gone, generatedPath, doc.components?.schemas ?? {});
      for (const problem of problems) fail(check, problem, sent, replay);
      if (operation.method === 'DELETE' && status < 300) gone.add(sent.url);
      if (status === 401 && credential === undefined) unauthorizedWithoutSecurity++;
      return status;
    };
    let run = 0;
    const details = await fc.check(
      fc.asyncProperty(validArbitrary, async (generated) => {
        const request = generated as GeneratedRequest;
        const replay = `valid run: seed=${seed} path=${run++} (CONTRACT_SEED=${SEED})`;
        const status = await sendValid(request, 'valid request', replay);
        if (status < 300 && accepted.length < MAX_BASES) accepted.push(request);
        if (formDocumented && toForm(request.body) !== undefined) {
          await sendValid(
            request,
            'valid request, form-encoded',
            replay,
            'application/x-www-form-urlencoded',
          );
        }
        return true;
      }),
      { seed, numRuns: VALID_RUNS },
    );
    if (details.failed) {
      failures.push({
        operation: name,
        check: 'harness',
        problem: `valid-request generation failed: ${String(details.errorInstance ?? '')}`,
        request: JSON.stringify(details.counterexample),
        answer: '',
        replay: `seed=${details.seed} path=${details.counterexamplePath}`,
      });
    }
    // A valid request with every optional part present: the widest base for breaking rules.
    const fullArbitrary = generator.arbitrary(operation.requestSchema, {
      fixed,
      headerPrefix: 'header',
      full: true,
    });
    const [full] = fc.sample(fullArbitrary, { seed, numRuns: 1 }) as GeneratedRequest[];
    if (!full) throw new Error('no base request');
    const fullReplay = `every optional part: base seed=${seed}`;
    const fullAccepted = (await sendValid(full, 'valid request, every optional part', fullReplay)) < 300;
    summaries.push(
      `${name}: valid answers ${[...statuses].map(([status, count]) => `${status}×${count}`).join(' ')}${
        refusals.size > 0
          ? `; most refused for ${[...refusals]
              .sort((a, b) => b[1] - a[1])
              .slice(0, 3)
              .map(([why, count]) => `${clip(why.trim()).slice(0, 80)} ×${count}`)
              .join(' | ')}`
          : ''
      }`,
    );
    if (unauthorizedWithoutSecurity > 0 && accepted.length === 0) return; // reported above; nothing else can be learned

    // Requests that break exactly one stated rule, each from a base the service accepted where
    // there is one (so that a refusal can only be about the broken rule).
    const bases = fullAccepted ? [full, ...accepted] : [...accepted, full];
    const seen = new Set<string>();
    const mutations: (Mutation & { baseAccepted: boolean })[] = [];
    for (const base of bases) {
      const baseAccepted = base !== full || fullAccepted;
      for (const mutation of generator.mutations(operation.requestSchema, base, [...PARAMETER_LOCATIONS])) {
        const [location] = mutation.path;
        // The request's parts are the test's own frame, not rules of the document.
        if (mutation.path.length <= 1 && location !== 'body') continue;
        // A path without one of its parameters is another address, not this operation; the
        // document lists parameters, it does not close the query or the headers.
        if (location === 'path' && mutation.reason === 'required') continue;
        if (location !== 'body' && mutation.rule.startsWith('additionalProperties')) continue;
        const key = `${mutation.path.map((segment) => (typeof segment === 'number' ? '*' : segment)).join('.')}|${mutation.rule}`;
        if (seen.has(key)) continue;
        seen.add(key);
        mutations.push({ ...mutation, baseAccepted });
      }
    }
    // The account's digest as the last invalid request left it. Nothing else writes between two
    // of them (the queue is not worked), so it is the next one's "before" unless a session was
    // made in between: that halves the digests, a third of this file's time on PostgreSQL.
    let digestNow: string | undefined;
    for (const [index, mutation] of mutations.entries()) {
      const replay = `invalid request #${index}: base seed=${seed}, ${mutation.rule} at ${mutation.path.join('.')}`;
      const request = mutation.value as GeneratedRequest;
      // A session is made before the digest: making it is not the request's write.
      const session = credential === SESSION ? await world.session() : undefined;
      const before =
        session === undefined && digestNow !== undefined ? digestNow : await digestOf(world.accountId);
      const sent = await send(request, { session });
      const after = await digestOf(world.accountId);
      digestNow = after;
      const problem =
        documentProblem(sent) ??
        invalidAcceptance(mutation, sent.response, mutation.baseAccepted) ??
        (before !== after ? 'the refused request wrote data' : undefined);
      if (problem) fail(`breaks ${mutation.rule} at ${mutation.path.join('.')}`, problem, sent, replay);
    }
    const base = full;

    // Media types the operation does not list.
    if (base.body !== undefined) {
      const listed = Object.keys(operation.spec.requestBody?.content ?? {});
      for (const mediaType of ['application/x-www-form-urlencoded', 'text/plain']) {
        if (listed.some((type) => mediaTypeMatches(type, mediaType))) continue;
        const request =
          mediaType === 'text/plain'
            ? { ...base, body: JSON.stringify(base.body) }
            : { ...base, body: base.body };
        const session = credential === SESSION ? await world.session() : undefined;
        const before = await digestOf(world.accountId);
        const sent = await send(request, { mediaType, session });
        const after = await digestOf(world.accountId);
        const problem =
          documentProblem(sent) ??
          (sent.response.statusCode !== 415
            ? `a body in ${mediaType}, which the document does not list for this operation, answered ${sent.response.statusCode} instead of 415`
            : before !== after
              ? 'the refused request wrote data'
              : undefined);
        if (problem) fail(`media type ${mediaType}`, problem, sent, `base seed=${seed}`);
      }
    }

    // Credentials.
    const sent = await send(base, { withCredential: false });
    const status = sent.response.statusCode;
    if (typeof credential === 'string' || credential === SESSION) {
      if (status !== 401) {
        fail(
          'security',
          `without the credential its security names, the answer is ${status}, not 401`,
          sent,
          `base seed=${seed}`,
        );
      }
    }
    const problem = documentProblem(sent);
    if (problem) fail('security', problem, sent, `base seed=${seed}`);
  }
});

/**
 * The bearer value an operation's `security` asks for (the first alternative the test can
 * satisfy), none, or the scheme it cannot satisfy.
 */
/** The credential of an operation that takes only the session cookie (decisions §14). */
const SESSION = Symbol('session cookie');

/** Paths whose requests a per-client-address limit counts (sign-in, the public booking JSON). */
const PER_ADDRESS_LIMITED = ['/api/v1/session', '/api/v1/booking/slots', '/api/v1/booking/book'];

/** A client address of 10.0.0.0/8 that no other request of the run comes from. */
function randomAddress(): string {
  const bytes = randomBytes(3);
  return `10.${bytes[0]}.${bytes[1]}.${bytes[2]}`;
}

function credentialFor(
  operation: Operation,
  world: World,
): string | typeof SESSION | undefined | { unknownScheme: string } {
  const requirements = (operation.spec.security ?? []).filter((r) => Object.keys(r).length > 0);
  if (requirements.length === 0) return undefined;
  const schemes = requirements.map((r) => Object.keys(r)[0] as string);
  for (const scheme of schemes) {
    if (/admin|operator/i.test(scheme)) return ADMIN_TOKEN;
    if (/record/i.test(scheme)) return world.recordToken;
    if (/api.?key|account/i.test(scheme)) return world.apiKey;
    if (/session/i.test(scheme)) return SESSION;
  }
  return { unknownScheme: schemes.join(', ') };
}

/** Where a 422 detail key points in the request's schemas: declared, free-form or nowhere. */
function locate(schema: JsonSchema, key: string, components: Record<string, JsonSchema>) {
  let current: JsonSchema | undefined = schema;
  const resolve = (s: JsonSchema): JsonSchema => {
    const match = typeof s?.$ref === 'string' ? /^#\/components\/schemas\/(.+)$/.exec(s.$ref) : null;
    return match ? resolve(components[match[1] as string] ?? {}) : s;
  };
  for (const segment of key.split('.')) {
    current = resolve(current ?? {});
    const branches: JsonSchema[] | undefined = current.anyOf ?? current.oneOf;
    // The branch that declares the key; branches that only add constraints beside the schema's
    // own properties (e.g. one of two keys required) leave the schema as it is.
    if (branches && !current.properties?.[segment]) {
      const declaring = branches.map(resolve).find((b) => b.properties?.[segment] || b.items);
      const shapeless = !current.type && !current.properties && current.additionalProperties === undefined;
      if (declaring) current = declaring;
      else if (shapeless) current = resolve(branches[0] ?? {});
    }
    if (current.properties?.[segment]) current = current.properties[segment];
    else if (/^\d+$/.test(segment) && current.items) current = current.items;
    else if (current.additionalProperties === false) return { kind: 'nowhere' as const };
    else if (current.type === 'object' || current.properties || current.additionalProperties)
      return { kind: 'free' as const };
    else return { kind: 'nowhere' as const };
  }
  return { kind: 'declared' as const, schema: resolve(current ?? {}) };
}

/**
 * Why the answer to a schema-valid request breaks the contract: nothing when it is accepted or
 * refused for a reason that follows from the data (see the file's header), else one problem
 * per unstated rule.
 */
function validRefusals(
  operation: Operation,
  request: GeneratedRequest,
  sent: { response: LightMyRequestResponse; url: string },
  world: World,
  gone: Set<string>,
  generatedPath: boolean,
  components: Record<string, JsonSchema>,
): string[] {
  const status = sent.response.statusCode;
  if (status >= 500) return [`a valid request answered ${status}`];
  if (status < 300) return [];
  const { code, keys } = errorBodyOf(sent.response);
  const label = `${status}${code ? ` ${code}` : ''}`;
  const hasIdempotencyKey =
    request.header['idempotency-key'] !== undefined ||
    (typeof request.body === 'object' &&
      request.body !== null &&
      ('idempotency_key' in request.body ||
        (typeof (request.body as any).meta === 'object' &&
          'idempotency_key' in ((request.body as any).meta ?? {}))));
  switch (status) {
    case 401:
      // Sign-in refuses the credentials in the body (an unknown email, a wrong password or
      // token): data, not the credential the operation's security names.
      if (code === 'invalid_credentials') return [];
      return operation.spec.security?.length
        ? ['the valid credential its security names was refused with 401']
        : ['the operation declares no security but asks for a credential (401)'];
    case 403:
      return [`refused with ${label} although the account has every module and the key every permission`];
    case 404:
      if (
        generatedPath ||
        request.body !== undefined ||
        Object.keys(request.query).length > 0 ||
        gone.has(sent.url)
      )
        return [];
      return [`the world's own resource answered ${label}`];
    case 409:
      return [];
    case 429:
      // A limit the operation states in words (the sign-in limit counts the failures of the
      // data sent, decisions §14); the account's rate limit is never reached by this test.
      if (code === 'rate_limited' && /\b429\b/.test(`${operation.spec.description ?? ''}`)) return [];
      return [`a schema-valid request was refused with ${label}`];
    case 422: {
      if (code === 'idempotency_key_reused' && hasIdempotencyKey) return [];
      if (keys.length === 0) return [`a schema-valid request was refused with ${label}, naming no key`];
      // Text the database cannot store, where the document states that rule for the operation
      // and the named value really holds such text.
      const unstorableStated = /invalid_characters/.test(
        operation.spec.responses?.['422']?.description ?? '',
      );
      const unstated = keys.filter(({ key, reason }) => {
        if (
          unstorableStated &&
          (reason === undefined || reason === 'invalid_characters') &&
          holdsUnstorableText(request, key)
        )
          return false;
        const candidates: JsonSchema[] = [
          operation.requestSchema.properties?.body ?? {},
          operation.requestSchema.properties?.query ?? {},
          operation.requestSchema.properties?.header ?? {},
        ];
        return !candidates.some((schema) => {
          const place = locate(schema, key, components);
          if (place.kind === 'declared') return typeof place.schema.description === 'string';
          return world.fieldKeys.has(key.split('.').at(-1) ?? '');
        });
      });
      if (unstated.length === 0) return [];
      const named = unstated.map(
        ({ key, reason }) => `${key.replace(/\.\d+(?=\.|$)/g, '.*')}${reason ? ` (${reason})` : ''}`,
      );
      return [...new Set(named)].map(
        (rule) =>
          `a schema-valid request was refused with ${label} for a rule the document does not state: ${rule}`,
      );
    }
    default:
      return [`a schema-valid request was refused with ${label}`];
  }
}

/** Whether the request's value at a 422 detail key holds NUL or an unpaired surrogate. */
function holdsUnstorableText(request: GeneratedRequest, key: string): boolean {
  const path = key.split('.');
  const values = [request.body, request.query, request.path].map((root) => {
    let current: any = root;
    for (const segment of path) current = current?.[segment];
    return current;
  });
  return values.some(
    (value) => typeof value === 'string' && (value.includes('\u0000') || !value.isWellFormed()),
  );
}

/** Why the answer to a request that breaks one stated rule breaks the contract, or undefined. */
function invalidAcceptance(
  mutation: Mutation,
  response: LightMyRequestResponse,
  baseAccepted: boolean,
): string | undefined {
  const status = response.statusCode;
  const where = mutation.path.join('.');
  if (status >= 500) return `answered ${status}`;
  if (status < 300) return `accepted (${status}) although it breaks ${mutation.rule} at ${where}`;
  // The unbroken request was refused too (for the data it carries): any 4xx may be about that.
  if (!baseAccepted) return undefined;
  const allowed = mutation.path[0] === 'path' ? [400, 404, 422] : [400, 422];
  const { code, keys } = errorBodyOf(response);
  if (!allowed.includes(status)) {
    return `refused with ${status}${code ? ` ${code}` : ''} instead of ${allowed.join('/')} for ${mutation.rule}`;
  }
  if (status !== 422 || keys.length === 0) return undefined;
  const location = mutation.path.slice(1).join('.');
  const parent = mutation.path.slice(1, -1).join('.');
  const accepted = new Set([location || 'body']);
  if (mutation.rule.startsWith('additionalProperties')) accepted.add(parent || 'body');
  // A removed key that was one of several alternatives (`anyOf` of `required`) may be answered
  // by naming another of them as required, beside it in the same object.
  const siblingOf = (key: string) => key.split('.').slice(0, -1).join('.') === parent;
  const named = keys.filter(
    ({ key, reason }) =>
      accepted.has(key) || (mutation.reason === 'required' && reason === 'required' && siblingOf(key)),
  );
  if (named.length === 0) {
    return `the 422 names ${keys.map((k) => k.key).join(', ')}, not ${[...accepted].join(' or ')}`;
  }
  if (
    mutation.reason === 'invalid_type' &&
    mutation.path[0] === 'body' &&
    named.every(({ reason }) => reason !== undefined && reason !== 'invalid_type')
  ) {
    return `a value of the wrong JSON type at ${location} answered reason ${named.map((k) => k.reason).join(', ')}, not invalid_type`;
  }
  return undefined;
}

/** A body as form fields (text values, lists repeated), or undefined when it has nested objects. */
function toForm(body: unknown): string | undefined {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return undefined;
  const form = new URLSearchParams();
  for (const [key, value] of Object.entries(body)) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item !== null && typeof item === 'object') return undefined;
      form.append(key, String(item));
    }
  }
  return form.toString();
}

/** The values a form body carries: text. */
function formValues(body: unknown): unknown {
  if (body === null || typeof body !== 'object') return body;
  return Object.fromEntries(
    Object.entries(body).map(([key, value]) => [
      key,
      Array.isArray(value) ? value.map(String) : String(value),
    ]),
  );
}

import formbody from '@fastify/formbody';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
  LogController,
} from 'fastify';
import type { TrustProxy } from './config.ts';
import { authPlugin } from './http/auth.ts';
import { checkRequestInput, SINGLE_BODY_LIMIT } from './http/body-limits.ts';
import { clientErrorHandler } from './http/client-error.ts';
import { registerErrorHandling, sendError, toAppError } from './http/error-handler.ts';
import { AppError } from './http/errors.ts';
import { registerMultipart } from './http/multipart.ts';
import { openapiOptions } from './http/openapi.ts';
import { restoreOffsetPlus, timeParametersOf } from './http/query-times.ts';
import { type RateLimiter, rateLimitPlugin } from './http/rate-limit.ts';
import { requestIdFor } from './http/request-id.ts';
import { NoQuery, refusesAnyBody, refusesAnyQuery, S1Error, S2Error } from './http/schemas.ts';
import { lazySerializerFactory } from './http/serialization.ts';
import {
  jsonBodyParser,
  refuseAnyBody,
  refuseContentCoding,
  refuseUnlistedForm,
  settleBody,
  typedValidatorFactory,
} from './http/validation.ts';
import { accountsRoutes } from './modules/accounts/accounts.routes.ts';
import { apiKeysRoutes } from './modules/api-keys/api-keys.routes.ts';
import { bookingPageRoutes } from './modules/booking/booking.page.routes.ts';
import { bookingRoutes } from './modules/booking/booking.routes.ts';
import { createBookingVisitorLimit } from './modules/booking/booking.visitors.ts';
import { registerConsole } from './modules/console/console.routes.ts';
import { automationsRoutes } from './modules/crm/automations.routes.ts';
import { crmRoutes } from './modules/crm/crm.routes.ts';
import { distributionRoutes } from './modules/distribution/distribution.routes.ts';
import { partnersRoutes } from './modules/distribution/partners.routes.ts';
import { setupRoutes } from './modules/distribution/setup.routes.ts';
import { documentsRoutes } from './modules/documents/documents.routes.ts';
import { entitiesRoutes } from './modules/entities/entities.routes.ts';
import { intakeRoutes } from './modules/intake/intake.routes.ts';
import { notesRoutes } from './modules/notes/notes.routes.ts';
import { answerRefusedSignInLink, sessionsRoutes } from './modules/people/sessions.routes.ts';
import { recordsRoutes } from './modules/records/records.routes.ts';
import { sourcesRoutes } from './modules/sources/sources.routes.ts';
import { systemRoutes } from './modules/system/system.routes.ts';
import { usersRoutes } from './modules/users/users.routes.ts';
import { errorInPage } from './modules/web-forms/web-forms.http.ts';
import { webFormsRoutes } from './modules/web-forms/web-forms.routes.ts';
import { createWebFormsService } from './modules/web-forms/web-forms.service.ts';
import { webhooksRoutes } from './modules/webhooks/webhooks.routes.ts';
import type { Services } from './services.ts';

export interface AppDeps {
  services: Services;
  adminTokenHash: Buffer;
  rateLimiter: RateLimiter;
  /** pino options, or false for no logs (tests). */
  logger: FastifyServerOptions['logger'];
  /** Answers whether the database is reachable, for /health. */
  checkDatabase: () => Promise<void>;
  /** The built web console (console/dist unless told otherwise, for tests). */
  consoleDir?: string;
  /** Which proxies may name the client address (LEADS_TRUST_PROXY); none by default. */
  trustProxy?: TrustProxy;
  /** Requests a minute of one client address to the public booking surface (LEADS_BOOKING_RATE_LIMIT_PER_MINUTE). */
  bookingRateLimitPerMinute?: number;
}

/** Fastify's types take a hop count as a function (trust the nearest `hops` proxies). */
function trustProxyOption(
  trust: TrustProxy,
): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof trust !== 'number') return trust;
  return (_address, hop) => hop < trust;
}

/**
 * Query names that carry a secret: the signed address's `sig`, and the names clients commonly
 * (mis)use to send a key, token or password in the URL (docs/decisions.md, HTTP conventions).
 */
const SECRET_QUERY_NAMES = [
  'sig',
  'token',
  'access_token',
  'key',
  'api_key',
  'api-key',
  'apikey',
  'password',
  'secret',
];
const SECRET_QUERY_VALUE = new RegExp(`([?&](?:${SECRET_QUERY_NAMES.join('|')})=)[^&#]*`, 'gi');

/** Path segments and query values that carry a secret, replaced in logged URLs. */
export function redactUrl(url: string): string {
  return url
    .replace(/\/in\/[^/?#]+/, '/in/[redacted]')
    .replace(/\/book\/bk_[^/?#]+/, '/book/[redacted]')
    .replace(/\/sign-in\/[^/?#]+/, '/sign-in/[redacted]')
    .replace(SECRET_QUERY_VALUE, '$1[redacted]');
}

export function loggerOptions(level: string): NonNullable<FastifyServerOptions['logger']> {
  return {
    level,
    redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[redacted]' },
    serializers: {
      req(request: { method: string; url: string; ip?: string }) {
        return { method: request.method, url: redactUrl(request.url), remoteAddress: request.ip };
      },
    },
  };
}

/**
 * The access log: one line a request, written when it is answered, with what Fastify spreads
 * over two ("incoming request", "request completed"), so that the default level (info) writes
 * half the lines (docs/decisions.md, HTTP conventions). Fastify's other lines stay as they are.
 */
class AccessLog extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    const line = { req: request, res: reply, responseTime: reply.elapsedTime };
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    else reply.log.info(line, 'request completed');
  }
}

/** Builds the whole HTTP application; never listens (start/server.ts does). */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger: deps.logger,
    genReqId: requestIdFor,
    bodyLimit: SINGLE_BODY_LIMIT,
    // `request.ip` is the client address of the per-address form limits (decisions §13, §14).
    trustProxy: trustProxyOption(deps.trustProxy ?? false),
    // `__proto__` and `constructor` keys are kept as plain data; code that copies bodies uses
    // null-prototype objects, so such keys never reach an object's prototype.
    onProtoPoisoning: 'ignore',
    onConstructorPoisoning: 'ignore',
    routerOptions: { maxParamLength: 200 },
    // An address that is not percent-encoded UTF-8, or a path parameter over the length, names
    // no resource: 404 with the body of its surface, like a malformed id; below /sign-in/, the
    // page of a link that cannot be used.
    frameworkErrors: (error, request, reply) => {
      reply.header('x-request-id', request.id);
      const known = error.code === 'FST_ERR_BAD_URL' || error.code === 'FST_ERR_MAX_PARAM_LENGTH';
      if (known) {
        const page = answerRefusedSignInLink(request, reply);
        if (page) return page;
      }
      return sendError(request, reply, known ? new AppError('not_found') : toAppError(error));
    },
    // What Node's HTTP parser refuses answers with the service's error body and a request id.
    clientErrorHandler,
    logController: new AccessLog(),
    ajv: { customOptions: { allErrors: false, removeAdditional: false } },
    schemaController: {
      compilersFactory: { buildValidator: typedValidatorFactory, buildSerializer: lazySerializerFactory },
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  // A client that hung up before its answer still leaves its line (AccessLog writes a request's
  // one line when it is answered). Not added at all when info is off.
  const logger = app.log as { isLevelEnabled?: (level: string) => boolean };
  if (logger.isLevelEnabled?.('info') === true) {
    app.addHook('onRequestAbort', (request, done) => {
      request.log.info({ req: request }, 'request aborted');
      done();
    });
  }
  // Only JSON and forms are request encodings here; anything else is 415.
  app.removeContentTypeParser('text/plain');
  // Fastify's JSON parser (poisoning keys kept as data, as above), but an empty body on a route
  // that takes none is no body (validation.ts).
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'string' },
    jsonBodyParser(app.getDefaultJsonParser('ignore', 'ignore')),
  );
  await app.register(formbody, { bodyLimit: SINGLE_BODY_LIMIT });
  registerMultipart(app);
  app.addHook('preParsing', async (request) => {
    refuseContentCoding(request);
    refuseUnlistedForm(request);
  });
  app.decorateRequest('entryProblems', null);
  app.decorateRequest('jsonTextStorable', false);
  app.addHook('preValidation', async (request) => settleBody(request));
  app.addHook('preValidation', async (request) => checkRequestInput(request));
  // An S2 route takes only the query parameters it names, and a body only where it names one
  // (docs/decisions.md, HTTP conventions).
  app.addHook('onRoute', (route) => {
    if (refusesAnyQuery(route)) route.schema = { ...route.schema, querystring: NoQuery };
    if (refusesAnyBody(route)) {
      const own = route.preValidation;
      route.preValidation =
        own === undefined ? [refuseAnyBody] : [refuseAnyBody, ...(Array.isArray(own) ? own : [own])];
    }
  });
  // Only routes whose query names a time filter pay for reading offsets back (query-times.ts).
  app.addHook('onRoute', (route) => {
    const names = timeParametersOf(route.schema?.querystring);
    if (names.length === 0) return;
    const restore = async (request: FastifyRequest) => restoreOffsetPlus(request.query, names);
    const own = route.preValidation;
    route.preValidation = own === undefined ? [restore] : [restore, ...(Array.isArray(own) ? own : [own])];
  });

  app.addSchema(S2Error);
  app.addSchema(S1Error);
  await app.register(swagger, openapiOptions());
  await app.register(swaggerUi, { routePrefix: '/docs' });
  const consolePage = await registerConsole(app, { distDir: deps.consoleDir });
  registerErrorHandling(app, {
    checkApiKey: (accountId, keyId) => deps.services.auth.checkApiKey(accountId, keyId),
    answerInPage: errorInPage,
    consolePage,
  });
  await app.register(authPlugin, { auth: deps.services.auth, adminTokenHash: deps.adminTokenHash });
  await app.register(rateLimitPlugin, { limiter: deps.rateLimiter });

  const { services } = deps;
  await app.register(systemRoutes, { checkDatabase: deps.checkDatabase });
  await app.register(accountsRoutes, { accounts: services.accounts });
  await app.register(apiKeysRoutes, { apiKeys: services.apiKeys });
  await app.register(sourcesRoutes, { sources: services.sources });
  await app.register(usersRoutes, { users: services.users });
  await app.register(sessionsRoutes, {
    sessions: services.sessions,
    auth: services.auth,
  });
  await app.register(entitiesRoutes, { entities: services.entities });
  await app.register(crmRoutes, { entities: services.entities, crm: services.crm });
  await app.register(webFormsRoutes, { findSource: (token) => services.auth.findSourceToken(token) });
  await app.register(intakeRoutes, {
    intakeApi: services.intakeApi,
    intake: services.intake,
    // The per-address limit of website forms shares the account limit's store (Redis when set).
    webForms: createWebFormsService({ rateLimiter: deps.rateLimiter, intake: services.intake }),
  });
  await app.register(recordsRoutes, {
    records: services.records,
    recordsApi: services.recordsApi,
    notes: services.notes,
  });
  await app.register(notesRoutes, { notes: services.notes });
  await app.register(documentsRoutes, { documents: services.documents });
  await app.register(webhooksRoutes, { webhooks: services.webhooks });
  await app.register(automationsRoutes, { automations: services.automations });
  await app.register(partnersRoutes, { partners: services.partners });
  await app.register(setupRoutes, { setup: services.distributionSetup });
  // The per-address limit of the public booking surface shares the account limit's store too.
  const bookingVisitors = createBookingVisitorLimit({
    rateLimiter: deps.rateLimiter,
    perMinute: deps.bookingRateLimitPerMinute,
  });
  await app.register(bookingRoutes, { booking: services.booking, visitors: bookingVisitors });
  await app.register(bookingPageRoutes, { booking: services.booking, visitors: bookingVisitors });
  await app.register(distributionRoutes, {
    distribution: services.distribution,
    deliveries: services.deliveries,
  });
  return app;
}

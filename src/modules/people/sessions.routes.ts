import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Negotiator from 'negotiator';
import { Type } from 'typebox';
import { type Credential, checkCsrf, ROLES, SESSION_COOKIE, sessionCookieOf } from '../../http/auth.ts';
import { AppError, type ValidationDetail, validationFailed } from '../../http/errors.ts';
import { s2Errors, Uuid } from '../../http/schemas.ts';
import type { AuthService } from '../auth/auth.service.ts';
import { SESSION_ABSOLUTE_MS } from '../auth/auth.service.ts';
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from './passwords.ts';
import type { SessionsService, StartedSession } from './sessions.service.ts';
import { LANGUAGES, type Language, unusableLinkPage } from './sign-in.texts.ts';

type SessionCredential = Extract<Credential, { kind: 'session' }>;

const tags = ['Session'];
const SessionBody = Type.Object({
  user: Type.Object({
    id: Uuid,
    email: Type.String(),
    name: Type.String(),
    role: Type.String({ enum: [...ROLES] }),
    account_id: Uuid,
    has_password: Type.Boolean({
      description: 'false until the person sets a password (a sign-in link still works)',
    }),
  }),
  csrf_token: Type.String({ description: 'Send it as X-CSRF-Token with every POST, PUT, PATCH and DELETE' }),
});
const Password = Type.String({ minLength: PASSWORD_MIN_LENGTH, maxLength: PASSWORD_MAX_LENGTH });
const Token = Type.String({ minLength: 1, maxLength: 100, description: 'A sign-in link’s token (sl_…)' });
const Email = Type.String({ minLength: 1, maxLength: 254 });
const SET_COOKIE_NOTE = `Sets the cookie \`${SESSION_COOKIE}\` (HttpOnly, SameSite=Lax, Path=/, Secure when PUBLIC_URL is https).`;
/** The pages of unusable links: no script, no outside resource. */
const PAGE_HEADERS = {
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-store',
  'referrer-policy': 'no-referrer',
};

/**
 * A sign-in names one way in: email and password (with `account_id` if it likes), or a link's
 * token, which names its account. A body with both is refused rather than read one way
 * (docs/decisions.md, People and sessions), and one with neither names what is missing.
 */
function checkCredentials(body: { email?: string; password?: string; token?: string; account_id?: string }) {
  const problems: ValidationDetail[] = [];
  if (body.token !== undefined) {
    for (const key of ['email', 'password', 'account_id'] as const) {
      if (body[key] !== undefined) {
        const message =
          key === 'account_id'
            ? 'a sign-in link’s token names its account'
            : 'give email and password, or token: not both';
        problems.push({ key, reason: 'not_allowed', message });
      }
    }
  } else if (body.email === undefined && body.password === undefined) {
    problems.push({ key: 'email', reason: 'required', message: 'give email and password, or token' });
  } else {
    for (const key of ['email', 'password'] as const) {
      if (body[key] === undefined) {
        problems.push({ key, reason: 'required', message: 'give email and password, or token' });
      }
    }
  }
  if (problems.length > 0) throw validationFailed(problems);
}

function languageOf(request: FastifyRequest): Language {
  return (new Negotiator(request.raw).languages(LANGUAGES)[0] as Language | undefined) ?? 'en';
}

export const sessionsRoutes: FastifyPluginAsyncTypebox<{
  sessions: SessionsService;
  auth: AuthService;
}> = async (app, { sessions, auth }) => {
  function cookie(value: string, maxAgeSeconds: number): string {
    const secure = sessions.cookieSecure() ? '; Secure' : '';
    return `${SESSION_COOKIE}=${value}; HttpOnly; SameSite=Lax; Path=/; Max-Age=${maxAgeSeconds}${secure}`;
  }

  function setSession(reply: FastifyReply, started: StartedSession) {
    return reply
      .header('set-cookie', cookie(started.token, Math.floor(SESSION_ABSOLUTE_MS / 1000)))
      .header('cache-control', 'no-store');
  }

  /** The signed-in session of a route that also serves people who are not signed in. */
  async function optionalSession(request: FastifyRequest): Promise<SessionCredential | null> {
    const value = sessionCookieOf(request);
    const found = value ? await auth.findSession(value) : null;
    if (found?.kind !== 'session') return null;
    checkCsrf(request, found);
    return found;
  }

  app.post(
    '/api/v1/session',
    {
      schema: {
        tags,
        operationId: 'signIn',
        summary: 'Sign in with email and password, or with a sign-in link’s token',
        description: `${SET_COOKIE_NOTE} Either \`email\` and \`password\` (and \`account_id\` if wanted) or \`token\`: a body with both answers 422 validation_failed, reason \`not_allowed\`. Unknown email and wrong password answer the same 401 invalid_credentials. More than 10 failed attempts for one email or from one address within 15 minutes answer 429 with Retry-After. An email that is a user of several accounts signs in to the oldest whose password matches, or to \`account_id\` when given.`,
        body: Type.Object(
          {
            email: Type.Optional({ ...Email, description: 'With `password`; not with `token`' }),
            password: Type.Optional(
              Type.String({
                minLength: 1,
                maxLength: PASSWORD_MAX_LENGTH,
                description: 'With `email`; not with `token`',
              }),
            ),
            token: Type.Optional({
              ...Token,
              description:
                'A sign-in link’s token (sl_…), alone: not with `email`, `password` or `account_id`',
            }),
            account_id: Type.Optional({
              ...Uuid,
              description: 'With `email` and `password`: the account to sign in to; not with `token`',
            }),
          },
          { additionalProperties: false },
        ),
        response: { 200: SessionBody, ...s2Errors },
      },
    },
    async (request, reply) => {
      const body = request.body;
      checkCredentials(body);
      const started =
        body.token !== undefined
          ? await sessions.signInWithToken(body.token, request.ip)
          : await sessions.signInWithPassword(
              { email: body.email!, password: body.password!, accountId: body.account_id },
              request.ip,
            );
      return setSession(reply, started).send(started.view);
    },
  );

  app.get(
    '/api/v1/session',
    {
      config: { auth: { accept: ['session'] } },
      schema: {
        tags,
        operationId: 'getSession',
        summary: 'The signed-in person and the CSRF token; 401 once the session has ended',
        response: { 200: SessionBody, ...s2Errors },
      },
    },
    async (request, reply) => {
      reply.header('cache-control', 'no-store');
      return sessions.view(request.credential as SessionCredential);
    },
  );

  app.delete(
    '/api/v1/session',
    {
      config: { auth: { accept: ['session'], role: 'viewer' } },
      schema: {
        tags,
        operationId: 'signOut',
        summary: 'Sign out: the session ends on the server, its cookie is refused from then on',
        response: { 204: Type.Null(), ...s2Errors },
      },
    },
    async (request, reply) => {
      await sessions.signOut(request.credential as SessionCredential);
      return reply.code(204).header('set-cookie', cookie('', 0)).send(null);
    },
  );

  app.post(
    '/api/v1/session/link',
    {
      schema: {
        tags,
        operationId: 'requestSignInLink',
        summary:
          'Email a one-time sign-in link (PUBLIC_URL/sign-in/{token}, valid LEADS_SIGNIN_LINK_TTL_S); 202 whether or not the address is known',
        body: Type.Object({ email: Email }, { additionalProperties: false }),
        response: { 202: Type.Null(), ...s2Errors },
      },
    },
    async (request, reply) => {
      await sessions.requestLink(request.body.email, request.ip, languageOf(request));
      // No body: nothing tells whether the address is known.
      return reply.code(202).send(undefined as never);
    },
  );

  app.post(
    '/api/v1/session/password',
    {
      // Signed in or with a token: the handler reads the session itself (optionalSession).
      config: { auth: { accept: ['session'], optional: true } },
      // Without a token the change rides on the cookie: its CSRF token is checked before the
      // body's schema (decisions §14), as on every other route, so that a forged request
      // learns nothing from a validation answer.
      preValidation: async (request) => {
        const body = request.body;
        const withToken = typeof body === 'object' && body !== null && 'token' in body;
        if (!withToken) await optionalSession(request);
      },
      schema: {
        tags,
        operationId: 'setPassword',
        summary: 'Set a password: with a sign-in link’s token, or signed in with the current password',
        description:
          'Signed in (cookie and X-CSRF-Token), `{password}` alone is enough while the person has no password, or within the link lifetime after signing in by a link (a reset). Every other session of the person ends. A wrong token or current password answers 401 invalid_credentials and counts as a failed sign-in: more than 10 within 15 minutes answer 429 with Retry-After.',
        body: Type.Object(
          {
            token: Type.Optional(Token),
            current_password: Type.Optional(Type.String({ minLength: 1, maxLength: PASSWORD_MAX_LENGTH })),
            password: Password,
          },
          { additionalProperties: false },
        ),
        response: { 204: Type.Null(), ...s2Errors },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const session = body.token === undefined ? await optionalSession(request) : null;
      await sessions.setPassword(
        { token: body.token, currentPassword: body.current_password, password: body.password },
        session,
        request.ip,
      );
      return reply.code(204).send(null);
    },
  );

  // A HEAD (a link checker, a mail scanner) must not use the link up, nor read as a broken link:
  // it answers as the page would be there, without looking at the token.
  const headOfLink = {
    schema: { hide: true },
    // The edge's refusals too (text the database cannot store in the address).
    errorHandler: (error: Error, _request: FastifyRequest, reply: FastifyReply) => {
      if (!(error instanceof AppError) || error.status >= 500) throw error;
      return headOfLinkPage(reply);
    },
  };
  const answerHead = async (_request: FastifyRequest, reply: FastifyReply) => headOfLinkPage(reply);
  app.head('/sign-in/:token', headOfLink, answerHead);

  // Opening a link signs in; one that cannot (unknown, used, expired, or not a token at all:
  // any text after `/sign-in/`) shows the page, as does one whose address the edge refused
  // (text the database cannot store).
  const openingLink = {
    schema: { hide: true },
    exposeHeadRoute: false,
    errorHandler: (error: Error, request: FastifyRequest, reply: FastifyReply) => {
      if (!(error instanceof AppError) || error.status >= 500) throw error;
      if (error.headers) reply.headers(error.headers);
      return unusableLink(request, reply, error.code === 'rate_limited' ? 429 : 410);
    },
  };
  const openLink = async (request: FastifyRequest, reply: FastifyReply, token: string) => {
    const started = await sessions.signInWithToken(token, request.ip);
    return setSession(reply, started).code(303).header('location', '/').send();
  };
  app.get<{ Params: { token: string } }>('/sign-in/:token', openingLink, async (request, reply) =>
    openLink(request, reply, request.params.token),
  );
  // A token over the router's 200 characters of a path parameter, or a path of several
  // segments, reaches no route above: it is a link that cannot be used all the same.
  app.head('/sign-in/*', headOfLink, answerHead);
  app.get<{ Params: { '*': string } }>('/sign-in/*', openingLink, async (request, reply) =>
    openLink(request, reply, request.params['*']),
  );
};

/** What a HEAD of a sign-in link answers: the page's headers, no body. */
function headOfLinkPage(reply: FastifyReply) {
  return reply.code(200).headers(PAGE_HEADERS).type('text/html; charset=utf-8').send();
}

/** The page of a sign-in link that cannot be used, in the browser's language. */
function unusableLink(request: FastifyRequest, reply: FastifyReply, status: number) {
  const language = languageOf(request);
  return reply
    .code(status)
    .headers(PAGE_HEADERS)
    .header('content-language', language)
    .type('text/html; charset=utf-8')
    .send(unusableLinkPage(language));
}

/**
 * An address below `/sign-in/` that the router refused before any route (not percent-encoded
 * UTF-8): a link that cannot be used, answered as one (the server's `frameworkErrors`); null
 * for any other address.
 */
export function answerRefusedSignInLink(request: FastifyRequest, reply: FastifyReply): FastifyReply | null {
  if (!request.url.startsWith('/sign-in/')) return null;
  if (request.method === 'HEAD') return headOfLinkPage(reply);
  return request.method === 'GET' ? unusableLink(request, reply, 410) : null;
}

import type { FastifyReply, FastifyRequest } from 'fastify';
import Negotiator from 'negotiator';
import type { SourceFormSettings } from '../../http/auth.ts';
import { credentialOf } from '../../http/auth.ts';
import { AppError, type ValidationDetail, validationFailed } from '../../http/errors.ts';
import type { Answer, IntakeApi } from '../intake/intake.api.ts';
import type { S2RecordBody } from '../intake/intake.handover.ts';
import type { IntakeContext } from '../intake/intake.service.ts';
import {
  formNameProblems,
  inlineFileWarnings,
  recordBodyOfForm,
  recordBodyOfJson,
  trapFilled,
} from './web-forms.body.ts';
import { LANGUAGES, type Language, receivedPage, refusedPage } from './web-forms.pages.ts';
import { originAllowed, originOf, type WebFormsService } from './web-forms.service.ts';

/**
 * How POST /api/v1/in/{token} speaks to browsers (decisions §13): pages or redirects for a
 * plain form post, CORS for pages that post with JavaScript. Routes opt in with `webForm`.
 */

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route is a website form's target: CORS, browser answers (decisions §13). */
    webForm?: boolean;
  }
}

const JSON_TYPE = 'application/json';
const HTML_TYPE = 'text/html';
/** Headers a page's script may read from an answer. */
const EXPOSED_HEADERS =
  'Retry-After, X-Request-Id, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Idempotent-Replayed';
/** Request headers a page's script may send (a preflight lists them). */
const ALLOWED_HEADERS = 'Content-Type, Accept, Accept-Language, Idempotency-Key';
/** Seconds a browser may keep a preflight's answer. */
const PREFLIGHT_MAX_AGE = '600';
/** The pages need no script, no outside resource and post nowhere. */
const PAGE_POLICY = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'";

export function isWebFormRoute(request: FastifyRequest): boolean {
  return request.routeOptions?.config?.webForm === true;
}

/** Whether the request prefers an HTML answer to JSON (a browser's plain form post). */
export function prefersHtml(request: FastifyRequest): boolean {
  return new Negotiator(request.raw).mediaTypes([JSON_TYPE, HTML_TYPE])[0] === HTML_TYPE;
}

function languageOf(request: FastifyRequest): Language {
  return (new Negotiator(request.raw).languages(LANGUAGES)[0] as Language | undefined) ?? 'en';
}

function formOf(request: FastifyRequest): SourceFormSettings | null {
  const credential = request.credential;
  return credential?.kind === 'source_token' ? credential.form : null;
}

/** The form's page, as a link back: an http(s) Referer only. */
function backLink(request: FastifyRequest): string | null {
  const referer = request.headers.referer;
  if (typeof referer !== 'string' || referer.length > 2000) return null;
  return originOf(referer) === null ? null : referer;
}

function addVary(reply: FastifyReply, names: string[]) {
  const existing = String(reply.getHeader('vary') ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  const lower = new Set(existing.map((name) => name.toLowerCase()));
  for (const name of names) if (!lower.has(name.toLowerCase())) existing.push(name);
  reply.header('vary', existing.join(', '));
}

function withParam(address: string, name: string, value: string): string {
  const url = new URL(address);
  url.searchParams.set(name, value);
  return url.toString();
}

function redirect(reply: FastifyReply, location: string): FastifyReply {
  return reply.code(303).header('location', location).header('cache-control', 'no-store').send();
}

function sendPage(reply: FastifyReply, status: number, language: Language, html: string) {
  return reply
    .code(status)
    .header('content-language', language)
    .header('content-security-policy', PAGE_POLICY)
    .header('x-content-type-options', 'nosniff')
    .header('cache-control', 'no-store')
    .type('text/html; charset=utf-8')
    .send(html);
}

/**
 * An error on a website form's route, for a browser: a 303 to the source's `error_url`
 * (`?error=<code>`), or a page. A refused origin always gets the page (its `error_url` would
 * hand the refusal to the page that was refused). Null when JSON is the answer.
 */
export function errorInPage(
  request: FastifyRequest,
  reply: FastifyReply,
  error: AppError,
): FastifyReply | null {
  if (!isWebFormRoute(request) || !prefersHtml(request)) return null;
  if (error.headers) reply.headers(error.headers);
  const form = formOf(request);
  if (form?.errorUrl && error.code !== 'origin_not_allowed') {
    return redirect(reply, withParam(form.errorUrl, 'error', error.code));
  }
  const retryAfter = Number(error.headers?.['retry-after']);
  const language = languageOf(request);
  const html = refusedPage(
    language,
    {
      code: error.code,
      details: error.details,
      retryAfterSeconds: error.code === 'rate_limited' && retryAfter > 0 ? retryAfter : undefined,
    },
    backLink(request),
  );
  return sendPage(reply, error.status, language, html);
}

/** An intake answer: JSON as the interface says, or for a browser a 303 or a page. */
export function sendIntakeAnswer(request: FastifyRequest, reply: FastifyReply, answer: Answer) {
  if (answer.replayed) reply.header('idempotent-replayed', 'true');
  if (!prefersHtml(request)) return reply.code(answer.status).send(answer.body as never);
  const body = answer.body as { id?: string; error?: string; details?: AppError['details'] };
  if (answer.status >= 400) {
    // A stored refusal replayed for the same idempotency key.
    const code = (body.error ?? 'internal_error') as AppError['code'];
    return errorInPage(request, reply, new AppError(code, { details: body.details }));
  }
  const form = formOf(request);
  if (form?.successUrl && body.id) return redirect(reply, withParam(form.successUrl, 'id', body.id));
  const language = languageOf(request);
  return sendPage(reply, answer.status, language, receivedPage(language, backLink(request)));
}

/**
 * CORS headers of every answer on a website form's route (decisions §13): the origin is let
 * read the answer when the source allows it; any origin while the source allows all, or when
 * no source is known yet (an unknown token's 401 says nothing about any source). No credentials.
 */
export function addCorsHeaders(request: FastifyRequest, reply: FastifyReply): void {
  // A preflight's answer (answerPreflight) says all it means to.
  if (request.method === 'OPTIONS') return;
  addVary(reply, ['Origin', 'Accept', 'Accept-Language']);
  const origin = request.headers.origin;
  if (typeof origin !== 'string') return;
  const form = formOf(request);
  if (form !== null && form.allowedOrigins.length > 0) {
    if (!originAllowed(form, originOf(origin))) return;
    reply.header('access-control-allow-origin', origin);
  } else {
    reply.header('access-control-allow-origin', '*');
  }
  reply.header('access-control-expose-headers', EXPOSED_HEADERS);
}

/** The answer to a preflight (OPTIONS) for a source, or for an unknown token. */
export function answerPreflight(
  request: FastifyRequest,
  reply: FastifyReply,
  form: SourceFormSettings | null,
): FastifyReply {
  addVary(reply, ['Origin', 'Access-Control-Request-Method', 'Access-Control-Request-Headers']);
  const origin = request.headers.origin;
  const allowed = typeof origin === 'string' && (form === null || originAllowed(form, originOf(origin)));
  if (allowed) {
    reply
      .header('access-control-allow-origin', form === null || form.allowedOrigins.length === 0 ? '*' : origin)
      .header('access-control-allow-methods', 'POST')
      .header('access-control-allow-headers', ALLOWED_HEADERS)
      .header('access-control-max-age', PREFLIGHT_MAX_AGE);
  }
  return reply.code(204).send();
}

/**
 * Whether a request that reached `/api/v1/in/*` names a token, one longer than the router takes
 * (path parameters end at 200 characters, app.ts), rather than a deeper path: the raw path is
 * read, so that an encoded `/` (`%2F`) stays part of a token as on the token's own route.
 */
export function namesOverlongToken(request: FastifyRequest): boolean {
  const path = request.url.split('?')[0] ?? '';
  return !path.slice(path.indexOf('/in/') + '/in/'.length).includes('/');
}

/**
 * onRequest of `POST /api/v1/in/*`: an overlong token names no source, so it gets an unknown
 * token's answer (401, a page or CORS as on the token's route); a deeper path stays an address
 * no route serves.
 */
export async function refuseOverlongToken(request: FastifyRequest, reply: FastifyReply) {
  if (namesOverlongToken(request)) throw new AppError('unauthorized');
  reply.callNotFound();
  return reply;
}

/** The post's body in its encoding (form or JSON) read as a record body, without its trap field. */
function recordBodyOf(request: FastifyRequest): S2RecordBody {
  const trap = formOf(request)?.honeypotField ?? null;
  const flat = request.body as S2RecordBody;
  return request.mediaType === JSON_TYPE
    ? recordBodyOfJson(flat, trap)
    : recordBodyOfForm(flat as unknown as Record<string, string | string[]>, trap);
}

/** What is wrong with a form body's names, its file parts' included; nothing for JSON. */
function nameProblemsOf(request: FastifyRequest): ValidationDetail[] {
  const body = request.body;
  if (request.mediaType === JSON_TYPE || body === null || typeof body !== 'object') return [];
  const names = [...Object.keys(body), ...(request.discardedFileParts ?? [])];
  return formNameProblems(names, formOf(request)?.honeypotField ?? null);
}

/** The hooks and handler of POST /api/v1/in/{token}. */
export function webFormHandlers({
  webForms,
  intakeApi,
  contextOf,
}: {
  webForms: WebFormsService;
  intakeApi: IntakeApi;
  contextOf: (request: FastifyRequest) => IntakeContext;
}) {
  return {
    /** onRequest, after authentication: the address's allowance, then the page's origin. */
    async admit(request: FastifyRequest) {
      const credential = credentialOf(request);
      if (credential.kind !== 'source_token') return;
      const { origin, referer } = request.headers;
      await webForms.admit(credential.sourceId, credential.form, request.ip, {
        origin: typeof origin === 'string' ? origin : undefined,
        referer: typeof referer === 'string' ? referer : undefined,
      });
    },

    /** preValidation: a filled trap is answered as a success before anything else is judged. */
    async catchSpam(request: FastifyRequest, reply: FastifyReply) {
      const form = formOf(request);
      if (!form || !trapFilled(request.body, form.honeypotField)) return;
      const ctx = contextOf(request);
      const entity = (request.body as { entity?: unknown }).entity;
      const body = recordBodyOf(request);
      // A file part's name that a real post is refused for is not echoed (nor logged) either.
      const fileParts = (request.discardedFileParts ?? []).filter(
        (name) => formNameProblems([name], null).length === 0,
      );
      // The warnings a created record would get, so that the answer tells the trap from nothing.
      const warnings = await intakeApi.warningsFor(ctx, body, inlineFileWarnings(fileParts));
      // Under an idempotency key a repeat is replayed, as a real post's is (decisions §13).
      const answer = await intakeApi.trapped(ctx, body, request.headers['idempotency-key'], () =>
        webForms.spamAnswer(entity, warnings),
      );
      await webForms.logSpam(ctx, entity, answer.status, warnings);
      await sendIntakeAnswer(request, reply, answer);
      return reply;
    },

    /**
     * preValidation, after the trap: what the form's schema cannot say of its names (it sees
     * flat names only, and never the file parts'), refused in the words the same JSON gets.
     * Before the nodes of lacking modules are set aside: a bare `crm` has no form spelling
     * with or without its module.
     */
    async checkNames(request: FastifyRequest) {
      const problems = nameProblemsOf(request);
      if (problems.length > 0) throw validationFailed(problems);
    },

    /** The handler: the body in its encoding read as a record body, then the intake's answer. */
    async takeIn(request: FastifyRequest, reply: FastifyReply) {
      const answer = await intakeApi.record(
        contextOf(request),
        recordBodyOf(request),
        request.headers['idempotency-key'],
        inlineFileWarnings(request.discardedFileParts),
      );
      return sendIntakeAnswer(request, reply, answer);
    },
  };
}

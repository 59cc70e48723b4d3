import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { accountIdOf, actorOf, credentialOf, senderNameOf } from '../../http/auth.ts';
import { BULK_BODY_LIMIT } from '../../http/body-limits.ts';
import { toAppError } from '../../http/error-handler.ts';
import { IdempotencyHeaders, s1Errors, s2Errors } from '../../http/schemas.ts';
import { requireBody } from '../../http/validation.ts';
import { webFormHandlers } from '../web-forms/web-forms.http.ts';
import type { WebFormsService } from '../web-forms/web-forms.service.ts';
import type { Answer, IntakeApi } from './intake.api.ts';
import { namedInBody, setAsideModuleNodes } from './intake.handover.ts';
import {
  BulkBody,
  BulkResponse,
  IntakeLogList,
  IntakeLogQuery,
  IntakeResponse,
  S1BulkBody,
  S1BulkResponse,
  S1IntakeBody,
  S1IntakeResponse,
  S2RecordBody,
  SOURCE_TOKEN_INTAKE,
  SourceTokenBody,
  SourceTokenIntakeResponse,
} from './intake.schemas.ts';
import type { IntakeContext, IntakeService } from './intake.service.ts';

const recordsWrite = { accept: ['api_key' as const], permission: 'records:write' as const };
/** Intake (single and S2 bulk) checks a remembered key in the statement that writes (one round trip). */
const recordsWriteRemembered = { ...recordsWrite, rememberedKey: true };
const tags = ['Intake'];

/** Before the schema: nodes of modules the account lacks are ignored with a warning (interface). */
async function setAsideLackingModules(request: FastifyRequest): Promise<void> {
  setAsideModuleNodes(request.body, credentialOf(request).account.modules);
}

/**
 * Every intake call is logged (decisions §10): a refusal the service did not log itself (one the
 * edge made before a lead was read) is logged here, before the error's answer is sent. A call
 * without an account credential was refused before anyone was known, and leaves no entry.
 */
function logRefusal(intake: IntakeService, endpoint: string) {
  return async (request: FastifyRequest, _reply: FastifyReply, error: Error) => {
    if (!request.credential || request.credential.kind === 'admin') return;
    await intake.logCallRefusal(contextOf(request, endpoint), namedInBody(request.body), toAppError(error));
  };
}

function contextOf(request: FastifyRequest, endpoint: string): IntakeContext {
  const credential = credentialOf(request);
  return {
    accountId: credential.account.id,
    modules: credential.account.modules,
    permissions: credential.kind === 'api_key' ? credential.permissions : null,
    role: credential.kind === 'session' ? credential.user.role : undefined,
    strict: credential.kind === 'api_key' && credential.strict,
    actor: credential.kind === 'session' ? actorOf(credential) : undefined,
    sourceId: credential.kind === 'source_token' ? credential.sourceId : null,
    sourceName: credential.kind === 'source_token' ? credential.sourceName : null,
    keyName: credential.kind === 'api_key' || credential.kind === 'session' ? senderNameOf(credential) : null,
    key: credential.kind === 'api_key' ? credential : null,
    requestId: request.id,
    endpoint,
  };
}

/** A browser sent on after its form post (decisions §13). */
const SeeOther = Type.Null({
  description:
    'For a browser (`Accept` preferring text/html) when the source has `success_url` (with `?id=<record id>`) or `error_url` (with `?error=<code>`): `Location` names it',
});

function send(reply: FastifyReply, answer: Answer) {
  if (answer.replayed) reply.header('idempotent-replayed', 'true');
  return reply.code(answer.status).send(answer.body as never);
}

const recordResponses = { 200: IntakeResponse, 201: IntakeResponse, ...s2Errors };
const sourceTokenResponses = {
  200: SourceTokenIntakeResponse,
  201: SourceTokenIntakeResponse,
  ...s2Errors,
  303: SeeOther,
};

export const intakeRoutes: FastifyPluginAsyncTypebox<{
  intakeApi: IntakeApi;
  intake: IntakeService;
  webForms: WebFormsService;
}> = async (app, { intakeApi, intake, webForms }) => {
  const webForm = webFormHandlers({ webForms, intakeApi, contextOf: (request) => contextOf(request, 'in') });

  app.post(
    '/api/v1/records',
    {
      config: { auth: recordsWriteRemembered },
      preValidation: setAsideLackingModules,
      onError: logRefusal(intake, 'records'),
      schema: {
        tags,
        operationId: 'createRecord',
        summary: 'Take in a record (201 created, 200 updated or duplicate)',
        body: S2RecordBody,
        headers: IdempotencyHeaders,
        response: recordResponses,
      },
    },
    async (request, reply) =>
      send(
        reply,
        await intakeApi.record(
          contextOf(request, 'records'),
          request.body,
          request.headers['idempotency-key'],
        ),
      ),
  );

  app.post(
    '/api/v1/in/:token',
    {
      config: {
        auth: { accept: ['source_token'] },
        acceptsForm: true,
        acceptsMultipart: true,
        webForm: true,
      },
      onRequest: webForm.admit,
      onError: logRefusal(intake, 'in'),
      preValidation: [requireBody, webForm.catchSpam, webForm.checkNames, setAsideLackingModules],
      schema: {
        tags,
        operationId: 'createRecordWithSourceToken',
        summary: 'Take in a record with a source token in the path (same rules as POST /api/v1/records)',
        description: SOURCE_TOKEN_INTAKE,
        params: Type.Object({
          // No maxLength: a token the router cuts off at 200 characters is an unknown token (401),
          // not a refused parameter (web-forms.routes.ts).
          token: Type.String({
            description:
              'The source token (st_…): the credential. A token that names no active source answers 401, whatever its length',
          }),
        }),
        body: SourceTokenBody,
        headers: IdempotencyHeaders,
        response: sourceTokenResponses,
      },
    },
    webForm.takeIn,
  );

  app.post(
    '/api/v1/records/bulk',
    {
      bodyLimit: BULK_BODY_LIMIT,
      config: { auth: recordsWriteRemembered, bodyEntries: 'records' },
      onError: logRefusal(intake, 'records.bulk'),
      schema: {
        tags,
        operationId: 'createRecordsBulk',
        summary: 'Take in up to 100 records; each entry succeeds or fails on its own',
        body: BulkBody,
        headers: IdempotencyHeaders,
        response: { 200: BulkResponse, ...s2Errors },
      },
    },
    async (request, reply) =>
      send(
        reply,
        await intakeApi.bulk(
          contextOf(request, 'records.bulk'),
          request.body as { records: unknown[] },
          request.headers['idempotency-key'],
          request.entryProblems,
        ),
      ),
  );

  app.get(
    '/api/v1/intake-log',
    {
      config: { auth: { accept: ['api_key'], permission: 'records:read' } },
      schema: {
        tags,
        operationId: 'listIntakeLog',
        summary: 'Outcome of every intake call, newest first (one entry per call)',
        description: 'A bulk call is one entry whose `items` list what became of each of its entries.',
        querystring: IntakeLogQuery,
        response: { 200: IntakeLogList, ...s2Errors },
      },
    },
    async (request) => intake.listLog(accountIdOf(request), request.query),
  );

  app.post(
    '/api/intake',
    {
      config: { auth: recordsWriteRemembered, acceptsForm: true },
      onError: logRefusal(intake, 's1.intake'),
      schema: {
        tags: ['S1'],
        operationId: 'createLeadS1',
        summary: 'Create one lead; flat JSON or form-encoded, keys matched to fields by key or label',
        body: S1IntakeBody,
        headers: IdempotencyHeaders,
        consumes: ['application/json', 'application/x-www-form-urlencoded'],
        response: { 200: S1IntakeResponse, ...s1Errors },
      },
    },
    async (request, reply) =>
      send(
        reply,
        await intakeApi.s1Lead(
          contextOf(request, 's1.intake'),
          request.body,
          request.headers['idempotency-key'],
        ),
      ),
  );

  app.post(
    '/api/leads/bulk',
    {
      bodyLimit: BULK_BODY_LIMIT,
      config: { auth: recordsWrite, bodyEntries: 'batch' },
      onError: logRefusal(intake, 's1.bulk'),
      schema: {
        tags: ['S1'],
        operationId: 'createLeadsBulkS1',
        summary: 'Create up to 1,000 leads, all or nothing',
        body: S1BulkBody,
        headers: IdempotencyHeaders,
        response: { 200: S1BulkResponse, ...s1Errors },
      },
    },
    async (request, reply) =>
      send(
        reply,
        await intakeApi.s1Bulk(
          contextOf(request, 's1.bulk'),
          request.body,
          request.headers['idempotency-key'],
          request.entryProblems,
        ),
      ),
  );
};

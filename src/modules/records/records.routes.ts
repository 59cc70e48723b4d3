import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { accountIdOf, actorOf, callerOf, credentialOf, keyOf } from '../../http/auth.ts';
import { IdParams, s1Errors, s2Errors } from '../../http/schemas.ts';
import type { NotesService } from '../notes/notes.service.ts';
import type { RecordsApi } from './records.api.ts';
import {
  HistoryQuery,
  IssuedToken,
  IssueTokenBody,
  PatchRecordBody,
  PatchRecordResponse,
  RecordHistory,
  RecordList,
  RecordListQuery,
  RecordOut,
  S1Lead,
  S1PatchBody,
  S1PatchResponse,
} from './records.schemas.ts';
import type { ChangeContext, RecordsService } from './records.service.ts';

const read = { accept: ['api_key' as const], permission: 'records:read' as const };
/** The read checks a key taken from memory in its own statement (one round trip). */
const readRemembered = { ...read, rememberedKey: true };
const write = { accept: ['api_key' as const], permission: 'records:write' as const };
const tags = ['Records'];

function changeContext(request: FastifyRequest): ChangeContext {
  const credential = credentialOf(request);
  return {
    accountId: credential.account.id,
    strict: credential.kind === 'api_key' && credential.strict,
    actor:
      credential.kind === 'api_key' || credential.kind === 'session' ? actorOf(credential) : 'record_token',
    requestId: request.id,
  };
}

export const recordsRoutes: FastifyPluginAsyncTypebox<{
  records: RecordsService;
  recordsApi: RecordsApi;
  notes: NotesService;
}> = async (app, { records, recordsApi }) => {
  app.get(
    '/api/v1/records/:id',
    {
      config: { auth: readRemembered },
      schema: {
        tags,
        operationId: 'getRecord',
        summary: 'Read a record; documents come back as addresses',
        params: IdParams,
        response: { 200: RecordOut, ...s2Errors },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      return records.get({ accountId: caller.account.id, key: keyOf(caller) }, request.params.id);
    },
  );

  app.get(
    '/api/v1/records/:id/history',
    {
      config: { auth: read },
      schema: {
        tags,
        operationId: 'getRecordHistory',
        summary: "A record's history, newest first, and its stays in stages with the time in each",
        params: IdParams,
        querystring: HistoryQuery,
        response: { 200: RecordHistory, ...s2Errors },
      },
    },
    async (request) => records.history(accountIdOf(request), request.params.id, request.query),
  );

  app.get(
    '/api/v1/records',
    {
      config: { auth: read },
      schema: {
        tags,
        operationId: 'listRecords',
        summary: 'List records changed since a time, oldest change first (for polling)',
        querystring: RecordListQuery,
        response: { 200: RecordList, ...s2Errors },
      },
    },
    async (request) => records.list(accountIdOf(request), request.query),
  );

  app.patch(
    '/api/v1/records/:id',
    {
      config: { auth: write },
      schema: {
        tags,
        operationId: 'updateRecord',
        summary: 'Change named fields and attach documents; unnamed fields stay untouched',
        params: IdParams,
        body: PatchRecordBody,
        response: { 200: PatchRecordResponse, ...s2Errors },
      },
    },
    async (request) => recordsApi.patch(changeContext(request), request.params.id, request.body, null),
  );

  app.patch(
    '/api/v1/records',
    {
      config: { auth: { accept: ['record_token'] } },
      schema: {
        tags,
        operationId: 'updateRecordWithToken',
        summary: 'Change the fields a record token opens (the token names the record)',
        body: PatchRecordBody,
        response: { 200: PatchRecordResponse, ...s2Errors },
      },
    },
    async (request) => {
      const credential = credentialOf(request);
      if (credential.kind !== 'record_token') throw new Error('record token expected');
      return recordsApi.patch(changeContext(request), credential.recordId, request.body, credential.fields);
    },
  );

  app.post(
    '/api/v1/records/:id/tokens',
    {
      config: { auth: write },
      schema: {
        tags,
        operationId: 'createRecordToken',
        summary: 'Issue a record token that opens the named fields of this record',
        params: IdParams,
        body: IssueTokenBody,
        response: { 201: IssuedToken, ...s2Errors },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await records.issueToken(accountIdOf(request), request.params.id, request.body)),
  );

  app.get(
    '/api/leads/:id',
    {
      config: { auth: read },
      schema: {
        tags: ['S1'],
        operationId: 'getLeadS1',
        summary: 'Read a lead with its latest events',
        params: IdParams,
        response: { 200: S1Lead, ...s1Errors },
      },
    },
    async (request) => records.getLead(accountIdOf(request), request.params.id),
  );

  app.patch(
    '/api/leads/:id',
    {
      config: { auth: write },
      schema: {
        tags: ['S1'],
        operationId: 'updateLeadS1',
        summary: 'Update lead fields, optionally with a note',
        params: IdParams,
        body: S1PatchBody,
        response: { 200: S1PatchResponse, ...s1Errors },
      },
    },
    async (request) =>
      recordsApi.patchLead(changeContext(request), request.params.id, request.body, credentialOf(request)),
  );
};

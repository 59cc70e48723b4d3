import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import fp from 'fastify-plugin';
import { Type } from 'typebox';
import type { Credential } from '../../http/auth.ts';
import { s2Errors } from '../../http/schemas.ts';
import {
  addCorsHeaders,
  answerPreflight,
  isWebFormRoute,
  namesOverlongToken,
  refuseOverlongToken,
} from './web-forms.http.ts';

const PreflightAnswer = Type.Null({
  description:
    'CORS preflight answered: `Access-Control-Allow-Origin` (the origin when the source allows it, `*` when it allows any), `Access-Control-Allow-Methods: POST`, `Access-Control-Allow-Headers`, `Access-Control-Max-Age`; without `Access-Control-Allow-Origin` when the origin is refused',
});

/**
 * CORS of website forms (decisions §13): the preflight of POST /api/v1/in/{token}, and the CORS
 * headers of every answer of a `webForm` route. No other route answers CORS.
 */
const routes: FastifyPluginAsyncTypebox<{
  findSource: (token: string) => Promise<Credential | null>;
}> = async (app, { findSource }) => {
  app.addHook('onSend', async (request, reply) => {
    if (isWebFormRoute(request)) addCorsHeaders(request, reply);
  });

  app.options(
    '/api/v1/in/:token',
    {
      config: { webForm: true },
      schema: {
        tags: ['Intake'],
        operationId: 'preflightRecordWithSourceToken',
        summary: 'CORS preflight of a website form’s post (no credential, no body)',
        params: Type.Object({
          token: Type.String({
            description: 'The source token (st_…); one that names no active source is answered as no source',
          }),
        }),
        response: { 204: PreflightAnswer, ...s2Errors },
      },
    },
    async (request, reply) => {
      const found = await findSource(request.params.token);
      return answerPreflight(request, reply, found?.kind === 'source_token' ? found.form : null);
    },
  );

  // A token over the router's 200 characters of a path parameter reaches neither route above;
  // it names no source, so it is answered as an unknown token is, not as a bare JSON 404.
  app.options(
    '/api/v1/in/*',
    { config: { webForm: true }, schema: { hide: true } },
    async (request, reply) =>
      namesOverlongToken(request) ? answerPreflight(request, reply, null) : reply.callNotFound(),
  );
  app.post(
    '/api/v1/in/*',
    {
      // The credential is refused by refuseOverlongToken, which tells a token from a deeper path.
      config: { auth: { accept: ['source_token'], optional: true }, webForm: true },
      onRequest: refuseOverlongToken,
      schema: { hide: true },
    },
    async (_request, reply) => reply.callNotFound(),
  );
};

export const webFormsRoutes = fp(routes, { name: 'web-forms' });

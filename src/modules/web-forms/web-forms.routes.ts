import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import fp from 'fastify-plugin';
import { Type } from 'typebox';
import type { Credential } from '../../http/auth.ts';
import { s2Errors } from '../../http/schemas.ts';
import { addCorsHeaders, answerPreflight, isWebFormRoute } from './web-forms.http.ts';

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
          token: Type.String({ maxLength: 200, description: 'The source token (st_…)' }),
        }),
        response: { 204: PreflightAnswer, ...s2Errors },
      },
    },
    async (request, reply) => {
      const found = await findSource(request.params.token);
      return answerPreflight(request, reply, found?.kind === 'source_token' ? found.form : null);
    },
  );
};

export const webFormsRoutes = fp(routes, { name: 'web-forms' });

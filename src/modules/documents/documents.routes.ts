import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf, credentialOf } from '../../http/auth.ts';
import { AppError } from '../../http/errors.ts';
import { IdParams, s2Errors, Timestamp } from '../../http/schemas.ts';
import type { DocumentsService } from './documents.service.ts';

const tags = ['Documents'];

/** RFC 6266 attachment header with an ASCII fallback and the UTF-8 name. */
function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

export const documentsRoutes: FastifyPluginAsyncTypebox<{ documents: DocumentsService }> = async (
  app,
  { documents },
) => {
  app.get(
    '/api/v1/documents/:id',
    {
      config: { auth: { accept: ['signed_url', 'api_key'], permission: 'documents:read' } },
      schema: {
        tags,
        operationId: 'getDocument',
        summary: 'Download a document (API key, or exp + sig of a signed address)',
        params: IdParams,
        querystring: Type.Object({
          exp: Type.Optional(
            Type.String({ maxLength: 20, description: 'End of validity of a signed address (unix seconds)' }),
          ),
          sig: Type.Optional(Type.String({ maxLength: 100, description: 'Signature of a signed address' })),
        }),
        response: {
          200: {
            description: 'The file itself, as its own media type (read from its bytes when it was fetched)',
            headers: {
              'Content-Disposition': { type: 'string', description: 'attachment, with the file name' },
              'Content-Security-Policy': { type: 'string', enum: ['sandbox'] },
              'Cache-Control': { type: 'string', enum: ['no-store, private'] },
              'X-Content-Type-Options': { type: 'string', enum: ['nosniff'] },
            },
            content: {
              '*/*': { schema: { type: 'string', format: 'binary', description: 'the file’s bytes' } },
            },
          },
          ...s2Errors,
        },
      },
    },
    async (request, reply) => {
      const credential = credentialOf(request);
      if (credential.kind === 'signed_url' && credential.documentId !== request.params.id.toLowerCase()) {
        throw new AppError('unauthorized');
      }
      const { row, stream } = await documents.open(credential.account.id, request.params.id);
      return reply
        .header('content-type', row.mime)
        .header('content-length', String(row.size))
        .header('content-disposition', contentDisposition(row.name))
        .header('content-security-policy', 'sandbox')
        .header('cache-control', 'no-store, private')
        .header('x-content-type-options', 'nosniff')
        .send(stream);
    },
  );

  app.post(
    '/api/v1/documents/:id/signed-url',
    {
      config: { auth: { accept: ['api_key'], permission: 'documents:read' } },
      schema: {
        tags,
        operationId: 'createDocumentSignedUrl',
        summary: 'A signed address for this document, valid 30 minutes',
        params: IdParams,
        response: { 200: Type.Object({ url: Type.String(), expires_at: Timestamp }), ...s2Errors },
      },
    },
    async (request) => documents.signedUrl(accountIdOf(request), request.params.id),
  );
};

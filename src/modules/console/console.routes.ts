import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** Where `npm start` and the test run build the console (scripts/build-console.ts). */
export const CONSOLE_DIST = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '../../../console/dist',
);

/**
 * First path segments that belong to the service, never to the console: an unknown address
 * under them keeps its surface's 404 (JSON below /api, the operator API's, the docs').
 */
const SERVICE_PREFIXES = ['api', 'admin', 'docs', 'book', 'sign-in', 'health', 'assets'];

/** The same policy for every console page: its own scripts and styles only, no framing. */
const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  // React Aria positions popovers with style attributes.
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "object-src 'none'",
].join('; ');

export function isConsoleAddress(url: string): boolean {
  const pathname = url.split('?')[0] ?? '/';
  const first = pathname.split('/')[1] ?? '';
  return !SERVICE_PREFIXES.includes(first.toLowerCase());
}

function acceptsHtml(request: FastifyRequest): boolean {
  return /\btext\/html\b/i.test(String(request.headers.accept ?? ''));
}

export interface ConsoleServing {
  /** Answers index.html when the request is a console page (GET or HEAD, HTML accepted). */
  answersPage(request: FastifyRequest): boolean;
  sendPage(reply: FastifyReply): Promise<FastifyReply>;
}

/**
 * Serves the built console from the same process: hashed assets below /assets with a year's
 * caching (their names change with their content), compressed where the browser accepts it,
 * index.html never from a cache, for `/`
 * and every console address (client routes), see decisions §14.
 */
export async function registerConsole(app: FastifyInstance, options: { distDir?: string } = {}) {
  const distDir = options.distDir ?? CONSOLE_DIST;
  let page: Buffer | null = null;
  // Read once it exists; a service started before the first build finds it on a later request.
  async function indexHtml(): Promise<Buffer | null> {
    if (page) return page;
    try {
      page = await readFile(path.join(distDir, 'index.html'));
    } catch {
      return null;
    }
    return page;
  }

  await app.register(fastifyStatic, {
    root: path.join(distDir, 'assets'),
    prefix: '/assets/',
    decorateReply: false,
    index: false,
    dotfiles: 'ignore',
    // Every file below /assets carries a hash of its content in its name.
    cacheControl: false,
    // The build writes Brotli and gzip copies beside each text asset (scripts/build-console.ts);
    // a browser that accepts one gets it, with `Vary: Accept-Encoding`.
    preCompressed: true,
    setHeaders(reply) {
      reply.header('cache-control', 'public, max-age=31536000, immutable');
      reply.header('x-content-type-options', 'nosniff');
    },
  });

  async function sendPage(reply: FastifyReply): Promise<FastifyReply> {
    const html = await indexHtml();
    reply.header('cache-control', 'no-cache').header('x-content-type-options', 'nosniff');
    if (html === null) {
      return reply
        .code(503)
        .type('text/plain; charset=utf-8')
        .send('The web console is not built yet: run `npm start` (or `node scripts/build-console.ts`).\n');
    }
    return reply
      .type('text/html; charset=utf-8')
      .header('content-security-policy', CONSOLE_CSP)
      .header('referrer-policy', 'same-origin')
      .header('x-frame-options', 'DENY')
      .send(html);
  }

  app.get('/', { schema: { hide: true } }, async (_request, reply) => sendPage(reply));

  const serving: ConsoleServing = {
    answersPage: (request) =>
      (request.method === 'GET' || request.method === 'HEAD') &&
      acceptsHtml(request) &&
      isConsoleAddress(request.url),
    sendPage,
  };
  return serving;
}

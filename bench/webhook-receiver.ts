/**
 * The bench's webhook receiver (a child process of `npm run bench`, on 127.0.0.1 only): answers
 * every delivery 200 at once and records, per delivery, when it arrived, its `webhook-id`, the
 * record id, the record's `created_at` and, for automation webhooks, the move's `crm.entered_at`
 * from the body. One delivery in `SAMPLE` has its signature verified with the `standardwebhooks`
 * package against each secret told (after each webhook or automation was created). Its own process, so that neither the load generator nor the service shares its
 * event loop and the receipt times stay honest.
 *
 *   POST /hook[/<name>] a delivery (distribution participations use a path each)
 *   POST /secret[?path=/hook/<name>]  a secret of that path's webhooks (body: the secret); each
 *                       one told for a path is tried
 *   GET  /deliveries    the deliveries recorded since the last call (and forgets them)
 *   GET  /health        200
 */
import http from 'node:http';
import { Webhook } from 'standardwebhooks';

export interface Delivery {
  webhookId: string;
  recordId: string | null;
  /** The record's `created_at` (ms since the epoch): stamped by the writing statement, before its commit. */
  createdAt: number;
  /** An automation webhook's `crm.entered_at` (ms): the move's time, stamped before its commit; NaN otherwise. */
  enteredAt: number;
  /** The envelope's `timestamp` (ms): the same statement's clock. */
  timestamp: number;
  /** When the request's body had arrived here (ms since the epoch). */
  receivedAt: number;
}

export interface DeliveriesAnswer {
  deliveries: Delivery[];
  verified: number;
  invalid: number;
}

const SAMPLE = 50;
/** Verifiers by request path: every secret told for that path. */
const verifiers = new Map<string, Webhook[]>();
let seen = 0;
let verified = 0;
let invalid = 0;
let deliveries: Delivery[] = [];

function readBody(request: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.on('error', reject);
  });
}

const server = http.createServer(async (request, response) => {
  try {
    const url = new URL(request.url ?? '/', 'http://receiver');
    if (request.method === 'POST' && (url.pathname === '/hook' || url.pathname.startsWith('/hook/'))) {
      const body = await readBody(request);
      const receivedAt = Date.now();
      response.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      const webhookId = String(request.headers['webhook-id'] ?? '');
      const pathVerifiers = verifiers.get(url.pathname) ?? [];
      if (pathVerifiers.length > 0 && seen++ % SAMPLE === 0) {
        const headers = request.headers as Record<string, string>;
        const verifies = (verifier: Webhook) => {
          try {
            verifier.verify(body, headers);
            return true;
          } catch {
            return false;
          }
        };
        if (pathVerifiers.some(verifies)) verified++;
        else invalid++;
      }
      const json = JSON.parse(body) as {
        timestamp?: string;
        data?: { record?: { id?: string; created_at?: string }; crm?: { entered_at?: string } };
      };
      deliveries.push({
        webhookId,
        recordId: json.data?.record?.id ?? null,
        createdAt: Date.parse(json.data?.record?.created_at ?? ''),
        enteredAt: Date.parse(json.data?.crm?.entered_at ?? ''),
        timestamp: Date.parse(json.timestamp ?? ''),
        receivedAt,
      });
      return;
    }
    if (request.method === 'POST' && url.pathname === '/secret') {
      const path = url.searchParams.get('path') ?? '/hook';
      verifiers.set(path, [...(verifiers.get(path) ?? []), new Webhook((await readBody(request)).trim())]);
      response.writeHead(204).end();
      return;
    }
    if (request.method === 'GET' && request.url === '/deliveries') {
      const answer: DeliveriesAnswer = { deliveries, verified, invalid };
      deliveries = [];
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
      return;
    }
    if (request.method === 'GET' && request.url === '/health') {
      response.writeHead(200).end('ok');
      return;
    }
    response.writeHead(404).end();
  } catch (error) {
    if (!response.headersSent) response.writeHead(500).end(String(error));
  }
});
server.keepAliveTimeout = 5_000;
server.listen(Number(process.env.PORT), '127.0.0.1');
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    server.close();
    server.closeAllConnections();
  });
}

import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { isS1Path, s1Body, s2Body } from './error-handler.ts';
import { AppError } from './errors.ts';

/**
 * What Node's HTTP parser refused before any route saw the request: a request line or header
 * that is not HTTP (a raw non-ASCII byte in the address, say), headers over Node's size, a
 * request that took too long to arrive. Fastify answers these itself with a body of its own
 * (`{"error":"Bad Request","message":"Client Error","statusCode":400}`) and no X-Request-Id;
 * this answers them as every other refusal is answered (docs/decisions.md, HTTP conventions):
 * code `invalid_request` in the body of the address's surface (S1 or S2, when the request line
 * can be read), an X-Request-Id, and HTTP's own status for a timeout (408) and for headers too
 * large (431). The connection is closed after it.
 */
const STATUS: Record<string, { status: number; reason: string; message: string }> = {
  ERR_HTTP_REQUEST_TIMEOUT: {
    status: 408,
    reason: 'Request Timeout',
    message: 'The request did not arrive in time',
  },
  HPE_HEADER_OVERFLOW: {
    status: 431,
    reason: 'Request Header Fields Too Large',
    message: 'The request headers are too large',
  },
};
const OTHER = { status: 400, reason: 'Bad Request', message: 'The request is not valid HTTP' };

/** The address of the request line the parser was reading, when the packet starts with one. */
function addressOf(packet: unknown): string | null {
  if (!Buffer.isBuffer(packet)) return null;
  const line = packet.subarray(0, 2048).toString('latin1');
  return /^[A-Z]+ (\/\S*) /.exec(line)?.[1] ?? null;
}

/** The server's `clientErrorHandler` (Fastify binds it to the instance). */
export function clientErrorHandler(
  this: { log: FastifyBaseLogger },
  error: Error & { code?: string; rawPacket?: unknown },
  socket: Socket,
): void {
  // A connection the client reset, or one already gone, has no one to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const { status, reason, message } = STATUS[error.code ?? ''] ?? OTHER;
  const requestId = randomUUID();
  const refusal = new AppError('invalid_request', { message });
  const address = addressOf(error.rawPacket);
  const body = JSON.stringify(address !== null && isS1Path(address) ? s1Body(refusal) : s2Body(refusal));
  this.log.info(
    { reqId: requestId, code: error.code, statusCode: status },
    'request refused by the HTTP parser',
  );
  // As Node does: no answer when one is being written on this connection already (it would
  // corrupt that one), only the close.
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  if (socket.writable && inFlight?.headersSent !== true) {
    socket.write(
      `HTTP/1.1 ${status} ${reason}\r\n` +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${requestId}\r\n` +
        'Connection: close\r\n\r\n' +
        body,
    );
  }
  socket.destroy(error);
}

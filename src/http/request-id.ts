import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** A caller's request id is echoed only when it is short and plain, so it cannot forge log lines. */
const SANE_REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

export function requestIdFor(request: IncomingMessage): string {
  const header = request.headers['x-request-id'];
  const given = Array.isArray(header) ? header[0] : header;
  return given && SANE_REQUEST_ID.test(given) ? given : randomUUID();
}

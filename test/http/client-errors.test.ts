import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { oneDatabase } from '../helpers/databases.ts';

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * What Node's HTTP parser refuses before any route (docs/decisions.md, HTTP conventions): the
 * service's error body, an X-Request-Id, the connection closed. No database is involved, so one
 * kind is enough.
 */
describe.each(oneDatabase('pglite'))('requests the HTTP parser refuses on %s', (kind) => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await startTestApp(kind);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as AddressInfo).port;
  });
  afterAll(async () => t?.close());

  /** Sends bytes as they are and reads the answer until the server closes the connection. */
  function send(bytes: Buffer): Promise<RawAnswer> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1');
      const chunks: Buffer[] = [];
      socket.on('data', (chunk) => chunks.push(chunk));
      socket.on('error', reject);
      socket.on('close', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const [head = '', body = ''] = text.split('\r\n\r\n');
        const [statusLine = '', ...lines] = head.split('\r\n');
        const headers: Record<string, string> = {};
        for (const line of lines) {
          const at = line.indexOf(':');
          headers[line.slice(0, at).toLowerCase()] = line.slice(at + 1).trim();
        }
        resolve({ status: Number(statusLine.split(' ')[1]), headers, body });
      });
      socket.write(bytes);
    });
  }

  const request = (target: string, extra = '') =>
    Buffer.concat([
      Buffer.from('GET '),
      Buffer.from(target, 'utf8'),
      Buffer.from(` HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}\r\n`),
    ]);

  it('answers a raw non-ASCII byte in the query with 400 invalid_request in the S2 body', async () => {
    const answer = await send(request('/api/v1/distribution/deliveries?q=köln'));
    expect(answer.status).toBe(400);
    expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(answer.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(answer.headers.connection).toBe('close');
    expect(JSON.parse(answer.body)).toEqual({ error: 'invalid_request' });
  });

  it('answers an S1 address in the S1 body, and a garbled request line in the S2 body', async () => {
    const s1 = await send(request('/api/leads?q=köln'));
    expect(s1.status).toBe(400);
    expect(JSON.parse(s1.body)).toEqual({ status: 'error', message: 'The request is not valid HTTP' });
    const garbled = await send(Buffer.from('NOT HTTP AT ALL\r\n\r\n'));
    expect(garbled.status).toBe(400);
    expect(garbled.headers['x-request-id']).toBeDefined();
    expect(JSON.parse(garbled.body)).toEqual({ error: 'invalid_request' });
  });

  it('answers headers over the size Node takes with 431 and the same body', async () => {
    const answer = await send(request('/api/v1/records', `X-Big: ${'a'.repeat(20_000)}\r\n`));
    expect(answer.status).toBe(431);
    expect(answer.headers['x-request-id']).toBeDefined();
    expect(JSON.parse(answer.body)).toEqual({ error: 'invalid_request' });
  });

  it('still answers a well-formed request on the same server', async () => {
    const answer = await send(
      request('/api/v1/distribution/deliveries?q=k%C3%B6ln', 'Connection: close\r\n'),
    );
    expect(answer.status).toBe(401);
    expect(answer.headers['x-request-id']).toBeDefined();
  });
});

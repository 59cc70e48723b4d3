import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
  json: any;
  at: number;
  /** When a request left unanswered (`hang`) was given up by its sender: its connection closed. */
  closedAt?: number;
}

/** How the receiver answers one request: a status (with headers and body), or no answer at all. */
export type Answer =
  | {
      status: number;
      headers?: Record<string, string>;
      body?: string /** answered this much later */;
      delayMs?: number;
    }
  | 'hang';

/**
 * A webhook receiver on 127.0.0.1, as a user would run one: every request's signature is
 * verified with the `standardwebhooks` package against the secrets it was told (a request that
 * fails verification is recorded in `invalid` and answered 400).
 */
export async function startReceiver(port = 0) {
  const received: Received[] = [];
  const invalid: Received[] = [];
  const answers: Answer[] = [];
  let secrets: string[] = [];
  let fallback: Answer | ((entry: Received) => Answer) = { status: 200, body: 'ok' };
  let beforeAnswer: ((entry: Received) => Promise<void>) | null = null;
  const hanging = new Set<http.ServerResponse>();
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const entry: Received = {
        headers: request.headers,
        body,
        json: JSON.parse(body || 'null'),
        at: Date.now(),
      };
      const verified =
        secrets.length > 0 &&
        secrets.every((secret) => {
          try {
            new Webhook(secret).verify(body, request.headers as Record<string, string>);
            return true;
          } catch {
            return false;
          }
        });
      if (!verified) {
        invalid.push(entry);
        response.writeHead(400).end('bad signature');
        return;
      }
      received.push(entry);
      const answer = answers.shift() ?? (typeof fallback === 'function' ? fallback(entry) : fallback);
      if (answer === 'hang') {
        hanging.add(response);
        response.on('close', () => {
          entry.closedAt = Date.now();
        });
        return;
      }
      const respond = () => response.writeHead(answer.status, answer.headers).end(answer.body ?? '');
      const answerNow = () => (answer.delayMs ? setTimeout(respond, answer.delayMs) : respond());
      if (beforeAnswer) void beforeAnswer(entry).finally(answerNow);
      else answerNow();
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const address = server.address() as AddressInfo;
  return {
    port: address.port,
    url: `http://127.0.0.1:${address.port}/hook`,
    received,
    invalid,
    /** Every secret given must verify each request (rotation: old and new). */
    verifyWith(...given: string[]) {
      secrets = given;
    },
    /** Answers for the next requests, in order; then `fallback`. */
    answerNext(...next: Answer[]) {
      answers.push(...next);
    },
    /** The answer to every request beyond `answerNext`'s, or a choice made per request. */
    answerAlways(answer: Answer | ((entry: Received) => Answer)) {
      fallback = answer;
    },
    /** Runs `step` on each verified request before answering it (the sender waits meanwhile). */
    beforeAnswering(step: (entry: Received) => Promise<void>) {
      beforeAnswer = step;
    },
    async close() {
      for (const response of hanging) response.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/** Waits until `check` holds, polling; fails after `timeoutMs`. */
export async function waitFor<T>(
  check: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as T;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

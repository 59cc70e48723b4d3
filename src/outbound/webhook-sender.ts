import { type AttemptResult, clip, MAX_REPLY_BYTES, parseRetryAfter } from './attempt.ts';
import { type GuardedFetcher, OutboundError } from './guarded-fetch.ts';
import { signatureHeader } from './signing.ts';

export interface WebhookToSend {
  url: string;
  /** The message id: the `webhook-id`, the same on every try. */
  id: string;
  body: string;
  /** Current secret first, then the previous one while it still signs. */
  secrets: string[];
}

/**
 * One POST of a signed webhook through the guarded fetcher: the address checked and pinned,
 * redirects not followed (a 3xx is a failed attempt), bounded by the fetcher's timeout.
 */
export function createWebhookSender(fetcher: GuardedFetcher) {
  return async function sendWebhook(message: WebhookToSend): Promise<AttemptResult> {
    const started = performance.now();
    const timestamp = Math.floor(Date.now() / 1000);
    const elapsed = () => Math.round(performance.now() - started);
    try {
      const response = await fetcher.request(message.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'webhook-id': message.id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signatureHeader(message.secrets, message.id, timestamp, message.body),
        },
        body: message.body,
        maxResponseBytes: MAX_REPLY_BYTES,
      });
      const ok = response.status >= 200 && response.status < 300;
      return {
        ok,
        statusCode: response.status,
        reply: clip(response.body),
        error: ok ? null : `http_${response.status}`,
        retry: !ok && response.status !== 410,
        gone: response.status === 410,
        retryAfterMs: ok ? null : parseRetryAfter(response.headers['retry-after']),
        durationMs: elapsed(),
      };
    } catch (error) {
      const reason = error instanceof OutboundError ? error.reason : 'network_error';
      return {
        ok: false,
        statusCode: null,
        reply: null,
        error: reason,
        // A refused address or a malformed URL stays so; anything else may pass later.
        retry: reason !== 'blocked_address' && reason !== 'unsupported_scheme',
        gone: false,
        retryAfterMs: null,
        durationMs: elapsed(),
      };
    }
  };
}

export type WebhookSender = ReturnType<typeof createWebhookSender>;

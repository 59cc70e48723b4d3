/** What one try to send a message came to; the engine turns it into an attempt row and a next step. */
export interface AttemptResult {
  ok: boolean;
  /** HTTP status, or the SMTP reply code. */
  statusCode: number | null;
  /** The first 1 KiB of the answer: the HTTP body, or the SMTP server's reply. */
  reply: string | null;
  /** Why it failed: `timeout`, `network_error`, `blocked_address`, `http_500`, `smtp_550`, … */
  error: string | null;
  /** Whether another try may succeed (false for 410, refused addresses, permanent SMTP answers). */
  retry: boolean;
  /** The receiver answered 410 Gone: its destination is disabled at once. */
  gone: boolean;
  /** The receiver's Retry-After, in milliseconds. */
  retryAfterMs: number | null;
  durationMs: number;
}

/** The first 1 KiB of an answer, as kept with the attempt. */
export const MAX_REPLY_BYTES = 1024;

export function clip(text: string): string {
  const bytes = Buffer.from(text, 'utf8');
  return bytes.length <= MAX_REPLY_BYTES ? text : bytes.subarray(0, MAX_REPLY_BYTES).toString('utf8');
}

/** Retry-After as seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | null {
  const raw = Array.isArray(value) ? value[0] : value;
  if (!raw) return null;
  const trimmed = raw.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

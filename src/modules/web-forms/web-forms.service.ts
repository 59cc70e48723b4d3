import type { SourceFormSettings } from '../../http/auth.ts';
import { AppError } from '../../http/errors.ts';
import { type RateLimiter, refuseWhenLimited } from '../../http/rate-limit.ts';
import { timeOrderedId } from '../../lib/ids.ts';
import type { StoredAnswer } from '../idempotency/idempotency.service.ts';
import type { IntakeContext, IntakeService, Warning } from '../intake/intake.service.ts';

/**
 * The rules a website form's post meets on top of the intake's (decisions §13): which pages
 * may post, how often one client address may post to a source, and what a filled trap gets.
 */

/** The origin of an `Origin` or `Referer` value, or null for `null`, an opaque or unreadable one. */
export function originOf(value: string): string | null {
  try {
    const url = new URL(value);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
    return url.origin;
  } catch {
    return null;
  }
}

/** Whether a page of `origin` may post to the source and read its answers. */
export function originAllowed(form: SourceFormSettings, origin: string | null): boolean {
  if (form.allowedOrigins.length === 0) return true;
  return origin !== null && form.allowedOrigins.includes(origin);
}

/** The header that names where a post came from: `Origin`, else `Referer`, else none. */
export function postOrigin(headers: { origin?: string; referer?: string }): string | null | undefined {
  // An empty header names nothing: an empty `Origin` must not hide the `Referer` from the check.
  const named = headers.origin?.trim() || headers.referer?.trim();
  if (!named) return undefined;
  return originOf(named);
}

/** The entity key a trapped post's answer names: its body's, as far as it can be one. */
function spamEntityKey(entity: unknown): string {
  return typeof entity === 'string' ? entity.slice(0, 100) : '';
}

export function createWebFormsService({
  rateLimiter,
  intake,
}: {
  rateLimiter: RateLimiter;
  intake: IntakeService;
}) {
  return {
    /**
     * Before the body is read: the per-source limit of the client address (429 as in §9), then
     * the page the post came from (403 `origin_not_allowed`). A post that names no page (a
     * server, a browser that strips both headers) is not refused by origin.
     */
    async admit(
      sourceId: string,
      form: SourceFormSettings,
      clientAddress: string,
      headers: { origin?: string; referer?: string },
    ): Promise<void> {
      const taken = await rateLimiter.take(`form:${sourceId}:${clientAddress}`, form.ratePerMinute);
      refuseWhenLimited(taken, 'Too many posts from this address to this source');
      const origin = postOrigin(headers);
      if (origin !== undefined && !originAllowed(form, origin)) throw new AppError('origin_not_allowed');
    },

    /**
     * The answer to a post whose trap field was filled: what a created record gets (201 with a
     * new id, time-ordered as record ids are), while no record is stored.
     */
    spamAnswer(entity: unknown, warnings: Warning[]): StoredAnswer {
      return {
        status: 201,
        body: { id: timeOrderedId(), entity: spamEntityKey(entity), created: true, updated: false, warnings },
      };
    },

    /** The intake log's `spam` entry of a trapped post, with the status it was answered (a replay's too). */
    async logSpam(ctx: IntakeContext, entity: unknown, status: number, warnings: Warning[]): Promise<void> {
      const entityKey = spamEntityKey(entity);
      await intake.logSpam(ctx, entityKey === '' ? null : entityKey, status, warnings);
    },
  };
}

export type WebFormsService = ReturnType<typeof createWebFormsService>;

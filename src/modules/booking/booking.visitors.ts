import { type RateLimiter, refuseWhenLimited } from '../../http/rate-limit.ts';

/** Requests a minute one client address may make to the public booking surface, by default. */
export const DEFAULT_BOOKING_RATE_LIMIT_PER_MINUTE = 120;

/**
 * The per-address limit of the public booking page and JSON (docs/decisions.md, Booking). They
 * take no API key, so no account limit meters them; a link's token cannot be guessed, but one
 * known link would otherwise let a client have slots computed without bound. The limit is per
 * client address (`request.ip`, LEADS_TRUST_PROXY) across every link, and shares the account
 * limit's store (Redis when set).
 */
export function createBookingVisitorLimit({
  rateLimiter,
  perMinute = DEFAULT_BOOKING_RATE_LIMIT_PER_MINUTE,
}: {
  rateLimiter: RateLimiter;
  perMinute?: number;
}) {
  return {
    /** 429 `rate_limited` (with `Retry-After`) once the address has used its minute's requests. */
    async admit(clientAddress: string): Promise<void> {
      const taken = await rateLimiter.take(`booking:${clientAddress}`, perMinute);
      refuseWhenLimited(taken, 'Too many requests from this address to booking links');
    },
  };
}

export type BookingVisitorLimit = ReturnType<typeof createBookingVisitorLimit>;

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { authorize } from './auth.ts';
import { AppError } from './errors.ts';

/**
 * The per-account rate limit (decisions §9): a token bucket per account holding a minute's
 * allowance (`rate_limit_per_minute`) that refills continuously at that rate. In-process by
 * default; shared through Redis when REDIS_URL is set, so that several nodes enforce one limit
 * (src/http/rate-limit-redis.ts, loaded only then).
 */

export interface RateDecision {
  allowed: boolean;
  /** The bucket size: the account's requests per minute. */
  limit: number;
  /** Whole tokens left after this request. */
  remaining: number;
  /** Seconds until the bucket is full again. */
  resetSeconds: number;
  /** Seconds until the next request would be let through; 0 when this one was. */
  retryAfterSeconds: number;
}

export interface RateLimiter {
  /** Takes one token from the account's bucket, if there is one. */
  take(accountId: string, limitPerMinute: number): Promise<RateDecision>;
  close(): Promise<void>;
}

const MINUTE_MS = 60_000;
/** Buckets the in-process limiter keeps before it forgets the least recently used one. */
export const DEFAULT_MAX_BUCKETS = 100_000;

/** A bucket of at least one token, so that a bad stored value cannot divide by zero. */
export function bucketSize(limitPerMinute: number): number {
  return Number.isFinite(limitPerMinute) && limitPerMinute >= 1 ? Math.floor(limitPerMinute) : 1;
}

/**
 * Slack for floating-point sums of refills: 11 s and then 1 s at 5 a minute must add up to the
 * token that 12 s make, not to 0.9999999999.
 */
const TOKEN_EPSILON = 1e-9;

/** Whole seconds until `tokens` more have dripped in, computed on whole milliseconds. */
function secondsFor(tokens: number, limit: number): number {
  return Math.ceil(Math.round((tokens * MINUTE_MS) / limit) / 1000);
}

export function decision(limit: number, tokensLeft: number, allowed: boolean): RateDecision {
  return {
    allowed,
    limit,
    remaining: Math.max(0, Math.floor(tokensLeft + TOKEN_EPSILON)),
    resetSeconds: secondsFor(limit - tokensLeft, limit),
    retryAfterSeconds: allowed ? 0 : Math.max(1, secondsFor(1 - tokensLeft, limit)),
  };
}

/**
 * Refuses a request that a limit (the account's, or a per-address one: website forms, booking
 * pages) did not let through: 429 `rate_limited` with `Retry-After` and the limit's headers.
 */
export function refuseWhenLimited(taken: RateDecision, message?: string): void {
  if (taken.allowed) return;
  throw new AppError('rate_limited', {
    message,
    headers: {
      'retry-after': String(taken.retryAfterSeconds),
      'ratelimit-limit': String(taken.limit),
      'ratelimit-remaining': String(taken.remaining),
      'ratelimit-reset': String(taken.resetSeconds),
    },
  });
}

export interface MemoryRateLimiterOptions {
  /** Milliseconds on a clock that only moves forward; injectable so tests need not sleep. */
  now?: () => number;
  maxBuckets?: number;
}

/** The limit of one process: a Map of buckets, bounded by forgetting the least recently used. */
export function createMemoryRateLimiter(options: MemoryRateLimiterOptions = {}): RateLimiter {
  const now = options.now ?? (() => performance.now());
  const maxBuckets = Math.max(1, options.maxBuckets ?? DEFAULT_MAX_BUCKETS);
  const buckets = new Map<string, { tokens: number; at: number }>();
  return {
    async take(accountId, limitPerMinute) {
      const limit = bucketSize(limitPerMinute);
      const at = now();
      const bucket = buckets.get(accountId);
      const elapsed = bucket ? Math.max(0, at - bucket.at) : 0;
      const tokens = bucket ? Math.min(limit, bucket.tokens + (elapsed * limit) / MINUTE_MS) : limit;
      const allowed = tokens >= 1 - TOKEN_EPSILON;
      const left = allowed ? tokens - 1 : tokens;
      // Deleting and re-inserting keeps the Map in order of last use, so the first key is the
      // bucket to forget; a forgotten account merely starts again with a full bucket.
      buckets.delete(accountId);
      buckets.set(accountId, { tokens: left, at });
      if (buckets.size > maxBuckets) {
        const oldest = buckets.keys().next();
        if (!oldest.done) buckets.delete(oldest.value);
      }
      return decision(limit, left, allowed);
    },
    async close() {
      buckets.clear();
    },
  };
}

async function meter(limiter: RateLimiter, request: FastifyRequest, reply: FastifyReply) {
  const credential = request.credential;
  // Operator calls and public routes have no account to meter.
  if (!credential || credential.kind === 'admin') return null;
  const taken = await limiter.take(credential.account.id, credential.account.rateLimitPerMinute);
  reply.header('ratelimit-limit', String(taken.limit));
  reply.header('ratelimit-remaining', String(taken.remaining));
  reply.header('ratelimit-reset', String(taken.resetSeconds));
  return taken;
}

/**
 * Meters every request that carries an account credential (API key, source token, record
 * token, signed address), on both surfaces. Registered after the auth plugin, so that its
 * onRequest hook runs once `request.credential` is known and before the body is read. It calls
 * `authorize` after the limit is taken, so that a request refused for a missing permission or
 * module (403) counts too, and one over the limit is 429 before anything else is said about it.
 */
export const rateLimitPlugin = fp<{ limiter: RateLimiter }>(
  async (app: FastifyInstance, { limiter }) => {
    app.addHook('onRequest', async (request, reply) => {
      const taken = await meter(limiter, request, reply);
      if (taken) refuseWhenLimited(taken);
      // What the credential may do, once the limit is taken (in this hook: one hook less a request).
      authorize(request);
    });
  },
  { name: 'rate-limit', dependencies: ['auth'] },
);

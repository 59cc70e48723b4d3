import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Redis } from 'ioredis';
import { AppError } from './errors.ts';

/**
 * The per-account rate limit (decisions §9): a token bucket holding a minute's allowance that
 * refills continuously. In-process by default; shared through Redis when REDIS_URL is set, so
 * that several nodes enforce one limit.
 */

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the bucket is full again. */
  resetSeconds: number;
  /** Seconds until the next request would be allowed (when refused). */
  retryAfterSeconds: number;
}

export interface RateLimiter {
  take(accountId: string, limitPerMinute: number): Promise<RateDecision>;
  close(): Promise<void>;
}

const MINUTE_MS = 60_000;

function decide(limit: number, tokens: number, allowed: boolean): RateDecision {
  const perMs = limit / MINUTE_MS;
  return {
    allowed,
    limit,
    remaining: Math.max(0, Math.floor(tokens)),
    resetSeconds: Math.ceil((limit - tokens) / perMs / 1000),
    retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - tokens) / perMs / 1000)),
  };
}

export function createMemoryRateLimiter(
  options: { now?: () => number; maxBuckets?: number } = {},
): RateLimiter {
  const now = options.now ?? Date.now;
  const maxBuckets = options.maxBuckets ?? 100_000;
  const buckets = new Map<string, { tokens: number; at: number }>();
  return {
    async take(accountId, limit) {
      const at = now();
      const bucket = buckets.get(accountId) ?? { tokens: limit, at };
      const tokens = Math.min(limit, bucket.tokens + ((at - bucket.at) * limit) / MINUTE_MS);
      const allowed = tokens >= 1;
      const left = allowed ? tokens - 1 : tokens;
      // Re-inserting keeps the Map in order of use, so the oldest bucket is dropped first.
      buckets.delete(accountId);
      buckets.set(accountId, { tokens: left, at });
      if (buckets.size > maxBuckets) buckets.delete(buckets.keys().next().value as string);
      return decide(limit, left, allowed);
    },
    async close() {
      buckets.clear();
    },
  };
}

/** One atomic step of the bucket, on the Redis server's clock. */
const TOKEN_BUCKET_SCRIPT = `
local limit = tonumber(ARGV[1])
local per_ms = limit / 60000
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = limit
  at = now
end
tokens = math.min(limit, tokens + (now - at) * per_ms)
local allowed = 0
if tokens >= 1 then
  allowed = 1
  tokens = tokens - 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((limit - tokens) / per_ms) + 1000)
return { allowed, tostring(tokens) }
`;

export interface RedisRateLimiterOptions {
  url: string;
  prefix?: string;
  onError?: (error: unknown) => void;
}

export function createRedisRateLimiter(options: RedisRateLimiterOptions): RateLimiter {
  const redis = new Redis(options.url, {
    // Fail fast: a request must not wait for a Redis that is gone.
    maxRetriesPerRequest: 1,
    connectTimeout: 1_000,
    commandTimeout: 500,
  });
  redis.on('error', (error) => options.onError?.(error));
  redis.defineCommand('takeToken', { numberOfKeys: 1, lua: TOKEN_BUCKET_SCRIPT });
  const prefix = options.prefix ?? 'leads:rate:';
  return {
    async take(accountId, limit) {
      try {
        const [allowed, tokens] = (await (
          redis as unknown as { takeToken(key: string, limit: number): Promise<[number, string]> }
        ).takeToken(`${prefix}${accountId}`, limit)) as [number, string];
        return decide(limit, Number(tokens), allowed === 1);
      } catch (error) {
        // Fail open: a Redis outage must not refuse all traffic; the event is logged.
        options.onError?.(error);
        return decide(limit, limit, true);
      }
    },
    async close() {
      redis.disconnect();
    },
  };
}

/** Applies the limit to every request that carries an account credential (after auth). */
export const rateLimitPlugin = fp<{ limiter: RateLimiter }>(
  async (app: FastifyInstance, { limiter }) => {
    app.addHook('onRequest', async (request, reply) => {
      const credential = request.credential;
      if (!credential || credential.kind === 'admin') return;
      const decision = await limiter.take(credential.account.id, credential.account.rateLimitPerMinute);
      reply.header('ratelimit-limit', String(decision.limit));
      reply.header('ratelimit-remaining', String(decision.remaining));
      reply.header('ratelimit-reset', String(decision.resetSeconds));
      if (!decision.allowed) {
        throw new AppError('rate_limited', {
          headers: { 'retry-after': String(decision.retryAfterSeconds) },
        });
      }
    });
  },
  { name: 'rate-limit', dependencies: ['auth'] },
);

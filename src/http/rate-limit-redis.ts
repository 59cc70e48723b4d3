import { Redis, type Result } from 'ioredis';
import { bucketSize, decision, type RateLimiter } from './rate-limit.ts';

/**
 * The per-account rate limit shared by all nodes through Redis (REDIS_URL). A module of its own,
 * which the server imports only when Redis is configured: ioredis is not loaded otherwise.
 */

/**
 * One atomic step of the same bucket in Redis, on the Redis server's clock so that nodes with
 * drifting clocks agree. The key expires once the bucket would be full again: a missing key
 * and a full bucket are the same state. Answers {allowed, tokens left as a string}, because
 * Redis would truncate a Lua number to an integer. 1e-9 is TOKEN_EPSILON.
 */
const TOKEN_BUCKET_SCRIPT = `
local limit = tonumber(ARGV[1])
local ms_per_token = 60000 / limit
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = limit
  at = now
end
tokens = math.min(limit, tokens + math.max(0, now - at) / ms_per_token)
local allowed = 0
if tokens >= 1 - 1e-9 then
  allowed = 1
  tokens = tokens - 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((limit - tokens) * ms_per_token) + 1000)
return { allowed, tostring(tokens) }
`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    takeRateToken(key: string, limit: number): Result<[number, string], Context>;
  }
}

export interface RedisRateLimiterOptions {
  url: string;
  /** Prefix of the bucket keys; tests use their own. */
  keyPrefix?: string;
  /** Longest wait for Redis before the request is let through. */
  commandTimeoutMs?: number;
  /**
   * Told when Redis cannot answer and requests are let through; at most once per
   * `warnIntervalMs`, so that an outage is one log line a while, not one per request.
   */
  onUnavailable?: (error: unknown) => void;
  warnIntervalMs?: number;
}

/** Statuses of an ioredis client that has lost its connection and is trying to get it back. */
const DISCONNECTED = new Set(['reconnecting', 'close', 'end']);

/**
 * The limit shared by all nodes through Redis. When Redis cannot be reached, requests are let
 * through (fail open): an outage of the limiter must not become an outage of intake.
 */
export function createRedisRateLimiter(options: RedisRateLimiterOptions): RateLimiter {
  const keyPrefix = options.keyPrefix ?? 'leads:rate:';
  const warnIntervalMs = options.warnIntervalMs ?? 30_000;
  const redis = new Redis(options.url, {
    // Connect on the first request, once the server (and its logger) is up, so that a
    // connection failure during start-up is not reported into the void.
    lazyConnect: true,
    // A request waits at most this long for Redis, and is not retried on another connection.
    commandTimeout: options.commandTimeoutMs ?? 500,
    connectTimeout: 1_000,
    maxRetriesPerRequest: 1,
    // A socket whose connection was refused never reports `close`; ioredis then waits this
    // long before destroying it, which would hold up the shutdown during a Redis outage.
    disconnectTimeout: 200,
  });
  redis.defineCommand('takeRateToken', { numberOfKeys: 1, lua: TOKEN_BUCKET_SCRIPT });

  let lastWarnAt = Number.NEGATIVE_INFINITY;
  const unavailable = (error: unknown) => {
    const at = Date.now();
    if (at - lastWarnAt < warnIntervalMs) return;
    lastWarnAt = at;
    options.onUnavailable?.(error);
  };
  // ioredis reports every failed (re)connection here; without a listener Node would print them.
  redis.on('error', unavailable);

  return {
    async take(accountId, limitPerMinute) {
      const limit = bucketSize(limitPerMinute);
      // While the connection is known to be down, do not make every request wait for the
      // command timeout; ioredis keeps reconnecting in the background.
      if (DISCONNECTED.has(redis.status)) {
        unavailable(new Error(`Redis connection is ${redis.status}`));
        return decision(limit, limit, true);
      }
      try {
        const [allowed, tokensLeft] = await redis.takeRateToken(`${keyPrefix}${accountId}`, limit);
        return decision(limit, Number(tokensLeft), allowed === 1);
      } catch (error) {
        unavailable(error);
        return decision(limit, limit, true);
      }
    },
    async close() {
      redis.disconnect();
    },
  };
}

import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryRateLimiter, createRedisRateLimiter } from '../../src/http/rate-limit.ts';
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

describe.each(TEST_DATABASES)('the per-account rate limit on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind);
  });
  afterAll(async () => t?.close());

  it('answers 429 rate_limited with Retry-After past the account limit, with RateLimit headers on every answer', async () => {
    const limited = await t.createAccount();
    await t.request({
      method: 'PATCH',
      url: `/admin/v1/accounts/${limited.id}`,
      key: ADMIN_TOKEN,
      body: { rate_limit_per_minute: 5 },
    });
    const remaining: number[] = [];
    for (let i = 0; i < 5; i++) {
      const response = await t.request({ method: 'GET', url: '/api/v1/entities', key: limited.apiKey });
      expect(response.statusCode).toBe(200);
      expect(response.headers['ratelimit-limit']).toBe('5');
      remaining.push(Number(response.headers['ratelimit-remaining']));
    }
    expect(remaining).toEqual([4, 3, 2, 1, 0]);
    const refused = await t.request({ method: 'GET', url: '/api/v1/entities', key: limited.apiKey });
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toEqual({ error: 'rate_limited' });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(refused.headers['ratelimit-remaining']).toBe('0');
    expect(Number(refused.headers['ratelimit-reset'])).toBeGreaterThan(0);
    // S1 answers in its own body.
    const s1 = await t.request({ method: 'GET', url: '/api/entities', key: limited.apiKey });
    expect(s1.statusCode).toBe(429);
    expect(s1.json().status).toBe('error');

    const other = await t.createAccount();
    expect((await t.request({ method: 'GET', url: '/api/v1/entities', key: other.apiKey })).statusCode).toBe(
      200,
    );
  });
});

describe('the token bucket', () => {
  it('refills continuously at the limit per minute', async () => {
    let now = 1_000_000;
    const limiter = createMemoryRateLimiter({ now: () => now });
    for (let i = 0; i < 60; i++) expect((await limiter.take('a', 60)).allowed).toBe(true);
    const refused = await limiter.take('a', 60);
    expect(refused).toMatchObject({ allowed: false, remaining: 0, retryAfterSeconds: 1 });
    now += 1_000;
    expect((await limiter.take('a', 60)).allowed).toBe(true);
    expect((await limiter.take('a', 60)).allowed).toBe(false);
    now += 60_000;
    expect(await limiter.take('a', 60)).toMatchObject({ allowed: true, remaining: 59 });
  });

  it('shares one limit between two nodes through Redis', async () => {
    const prefix = `leads-test:${randomUUID()}:`;
    const errors: unknown[] = [];
    const nodeA = createRedisRateLimiter({ url: REDIS_URL, prefix, onError: (e) => errors.push(e) });
    const nodeB = createRedisRateLimiter({ url: REDIS_URL, prefix, onError: (e) => errors.push(e) });
    try {
      const decisions = [];
      for (let i = 0; i < 10; i++) decisions.push(await (i % 2 === 0 ? nodeA : nodeB).take('acct', 6));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(6);
      expect(decisions.at(-1)).toMatchObject({ allowed: false, limit: 6 });
      expect(errors).toEqual([]);
    } finally {
      await nodeA.close();
      await nodeB.close();
      const redis = new Redis(REDIS_URL);
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length) await redis.del(...keys);
      redis.disconnect();
    }
  });

  it('lets requests through when Redis cannot be reached, and says so', async () => {
    const errors: unknown[] = [];
    const limiter = createRedisRateLimiter({ url: 'redis://127.0.0.1:1', onError: (e) => errors.push(e) });
    try {
      const decision = await limiter.take('acct', 5);
      expect(decision.allowed).toBe(true);
      expect(errors.length).toBeGreaterThan(0);
    } finally {
      await limiter.close();
    }
  });
});

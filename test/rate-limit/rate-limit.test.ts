import { randomUUID } from 'node:crypto';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.ts';
import { createMemoryRateLimiter, type RateLimiter } from '../../src/http/rate-limit.ts';
import { createRedisRateLimiter, type RedisRateLimiterOptions } from '../../src/http/rate-limit-redis.ts';
import { hashSecret } from '../../src/lib/credentials.ts';
import { ADMIN_TOKEN, startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { ContractChecker } from '../helpers/contract.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

/** The machine's Redis; only loopback receives test traffic. */
const REDIS_URL = 'redis://127.0.0.1:6379';

/** A key prefix of its own per test, and the cleanup of every key under it. */
function redisNamespace() {
  const keyPrefix = `leads-test:rate:${randomUUID()}:`;
  return {
    keyPrefix,
    async clean() {
      const redis = new Redis(REDIS_URL);
      try {
        const keys = await redis.keys(`${keyPrefix}*`);
        if (keys.length > 0) await redis.del(...keys);
      } finally {
        redis.disconnect();
      }
    },
  };
}

function redisLimiter(options: Omit<RedisRateLimiterOptions, 'url'>, warnings: unknown[] = []) {
  return createRedisRateLimiter({
    url: REDIS_URL,
    onUnavailable: (error) => warnings.push(error),
    ...options,
  });
}

const RATE_HEADERS = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset'];

describe.each(TEST_DATABASES)('the per-account rate limit on %s', (kind) => {
  let t: TestApp;
  // The limiter's clock: it stands still unless a test moves it, so no test sleeps.
  let clockMs = 1_000_000;

  beforeAll(async () => {
    t = await startTestApp(kind, { rateLimiter: createMemoryRateLimiter({ now: () => clockMs }) });
  });
  afterAll(async () => t?.close());

  const entities = (account: TestAccount) =>
    t.request({ method: 'GET', url: '/api/v1/entities', key: account.apiKey });

  async function limitTo(account: TestAccount, perMinute: number) {
    const patched = await t.request({
      method: 'PATCH',
      url: `/admin/v1/accounts/${account.id}`,
      key: ADMIN_TOKEN,
      body: { rate_limit_per_minute: perMinute },
    });
    expect(patched.statusCode).toBe(200);
    expect(patched.json().rate_limit_per_minute).toBe(perMinute);
  }

  /** Spends the whole bucket of an account limited to `perMinute` (the clock standing still). */
  async function exhaust(account: TestAccount, perMinute: number) {
    await limitTo(account, perMinute);
    for (let i = 0; i < perMinute; i++) expect((await entities(account)).statusCode).toBe(200);
  }

  describe('happy path', () => {
    it('puts the RateLimit headers on every answer, 1,200 a minute by default, Remaining counting down', async () => {
      const account = await t.createAccount();
      const remaining: number[] = [];
      for (let i = 0; i < 3; i++) {
        const answer = await entities(account);
        expect(answer.statusCode).toBe(200);
        expect(answer.headers['ratelimit-limit']).toBe('1200');
        expect(answer.headers['ratelimit-reset']).toMatch(/^[1-9]\d*$/);
        expect(answer.headers['retry-after']).toBeUndefined();
        remaining.push(Number(answer.headers['ratelimit-remaining']));
      }
      expect(remaining).toEqual([1199, 1198, 1197]);
    });

    it('lets 5 requests through at 5 a minute and refuses the 6th with 429, Retry-After and the headers', async () => {
      const account = await t.createAccount();
      await limitTo(account, 5);
      const remaining: string[] = [];
      for (let i = 0; i < 5; i++) {
        const answer = await entities(account);
        expect(answer.statusCode).toBe(200);
        expect(answer.headers['ratelimit-limit']).toBe('5');
        remaining.push(String(answer.headers['ratelimit-remaining']));
      }
      expect(remaining).toEqual(['4', '3', '2', '1', '0']);

      const refused = await entities(account);
      expect(refused.statusCode).toBe(429);
      expect(refused.json()).toEqual({ error: 'rate_limited' });
      // 5 a minute is one token every 12 s; the empty bucket is full again in 60 s.
      expect(refused.headers['retry-after']).toBe('12');
      expect(refused.headers['ratelimit-limit']).toBe('5');
      expect(refused.headers['ratelimit-remaining']).toBe('0');
      expect(refused.headers['ratelimit-reset']).toBe('60');
    });

    it('refills the bucket as time passes', async () => {
      const account = await t.createAccount();
      await exhaust(account, 5);
      expect((await entities(account)).statusCode).toBe(429);

      clockMs += 11_000;
      const stillEmpty = await entities(account);
      expect(stillEmpty.statusCode).toBe(429);
      expect(stillEmpty.headers['retry-after']).toBe('1');

      clockMs += 1_000;
      const oneToken = await entities(account);
      expect(oneToken.statusCode).toBe(200);
      expect(oneToken.headers['ratelimit-remaining']).toBe('0');
      expect((await entities(account)).statusCode).toBe(429);

      clockMs += 60_000;
      const full = await entities(account);
      expect(full.statusCode).toBe(200);
      expect(full.headers['ratelimit-remaining']).toBe('4');
    });

    it('applies a changed limit from the next request on', async () => {
      const account = await t.createAccount();
      await exhaust(account, 5);
      await limitTo(account, 10);
      // The bucket is still empty, but now holds 10 and refills one token every 6 s.
      const refused = await entities(account);
      expect(refused.statusCode).toBe(429);
      expect(refused.headers['ratelimit-limit']).toBe('10');
      expect(refused.headers['retry-after']).toBe('6');
      clockMs += 6_000;
      expect((await entities(account)).statusCode).toBe(200);
    });
  });

  describe('errors', () => {
    it('answers S1 with 429 in the S1 error body, with Retry-After and the headers', async () => {
      const account = await t.createAccount();
      await exhaust(account, 2);
      const refused = await t.request({ method: 'GET', url: '/api/entities', key: account.apiKey });
      expect(refused.statusCode).toBe(429);
      expect(refused.json()).toEqual({ status: 'error', message: expect.any(String) });
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(refused.headers['ratelimit-remaining']).toBe('0');
    });

    it('counts other refusals of a known account too and marks them: 404, 422, 403', async () => {
      const account = await t.createAccount();
      const narrowKey = await t.request({
        method: 'POST',
        url: '/api/v1/settings/api-keys',
        key: account.apiKey,
        body: { name: 'read only', permissions: ['records:read'] },
      });
      expect(narrowKey.statusCode).toBe(201);
      const answers = [
        await t.request({
          method: 'GET',
          url: `/api/v1/records/${randomUUID()}`,
          key: account.apiKey,
        }),
        await t.request({ method: 'POST', url: '/api/v1/settings/api-keys', key: account.apiKey, body: {} }),
        // The key lacks the `settings` permission; the account has not booked `crm`.
        await t.request({ method: 'GET', url: '/api/v1/settings/api-keys', key: narrowKey.json().key }),
        await t.request({ method: 'GET', url: '/api/v1/crm/pipelines', key: account.apiKey }),
      ];
      expect(answers.map((answer) => answer.statusCode)).toEqual([404, 422, 403, 403]);
      expect(answers.map((answer) => answer.headers['ratelimit-remaining'])).toEqual([
        '1198',
        '1197',
        '1196',
        '1195',
      ]);
      // Over the limit, what the key or the account lacks is not told: the answer is 429.
      await exhaust(account, 1);
      for (const refused of [
        await t.request({ method: 'GET', url: '/api/v1/settings/api-keys', key: narrowKey.json().key }),
        await t.request({ method: 'GET', url: '/api/v1/crm/pipelines', key: account.apiKey }),
      ]) {
        expect(refused.statusCode).toBe(429);
        expect(refused.json()).toEqual({ error: 'rate_limited' });
        expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      }
    });

    it('counts an unknown address of the API called with a key, and says so; a wrong key still gets 404', async () => {
      const account = await t.createAccount();
      const answers = [
        await t.request({ method: 'GET', url: '/api/v1/nope', key: account.apiKey }),
        await t.request({ method: 'DELETE', url: '/api/v1/entities', key: account.apiKey }),
        await t.request({ method: 'GET', url: '/api/nope', key: account.apiKey }),
      ];
      expect(answers.map((answer) => answer.statusCode)).toEqual([404, 404, 404]);
      expect(answers.map((answer) => answer.headers['ratelimit-remaining'])).toEqual([
        '1199',
        '1198',
        '1197',
      ]);
      const wrongKey = await t.request({ method: 'GET', url: '/api/v1/nope', key: 'lk_unknown' });
      expect(wrongKey.statusCode).toBe(404);
      expect(wrongKey.json()).toEqual({ error: 'unknown_endpoint' });
      expect(wrongKey.headers['ratelimit-remaining']).toBeUndefined();
      await exhaust(account, 1);
      // Straight to the app: the contract checker knows no answer of an address that is not there.
      const over = await t.app.inject({
        method: 'GET',
        url: '/api/v1/nope',
        headers: { authorization: `Bearer ${account.apiKey}` },
      });
      expect(over.statusCode).toBe(429);
    });

    it('documents a 4xx answer on every route below /api, so a 429 from any of them meets the contract', () => {
      const document = t.app.swagger() as unknown as {
        paths: Record<string, Record<string, { responses: object }>>;
      };
      const operations = Object.entries(document.paths).filter(([path]) => path.startsWith('/api/'));
      expect(operations.length).toBeGreaterThan(10);
      for (const [path, methods] of operations) {
        for (const [method, operation] of Object.entries(methods)) {
          expect(Object.keys(operation.responses), `${method} ${path}`).toContain('4XX');
        }
      }
    });
  });

  describe('security', () => {
    it('leaves other accounts alone when one is refused', async () => {
      const limited = await t.createAccount();
      const other = await t.createAccount();
      await exhaust(limited, 3);
      expect((await entities(limited)).statusCode).toBe(429);
      const answer = await entities(other);
      expect(answer.statusCode).toBe(200);
      expect(answer.headers['ratelimit-remaining']).toBe('1199');
    });

    it('meters the account, not the credential: a second key and a source token share its bucket', async () => {
      const account = await accountWithLeads(t);
      const secondKey = await t.request({
        method: 'POST',
        url: '/api/v1/settings/api-keys',
        key: account.apiKey,
        body: { name: 'second' },
      });
      const source = await t.request({
        method: 'POST',
        url: '/api/v1/settings/sources',
        key: account.apiKey,
        body: { name: 'Landing page' },
      });
      await limitTo(account, 3);
      const intake = (email: string) =>
        t.request({
          method: 'POST',
          url: `/api/v1/in/${source.json().token}`,
          body: { entity: 'lead', fields: { email } },
        });

      expect((await entities(account)).statusCode).toBe(200);
      expect((await entities({ id: account.id, apiKey: secondKey.json().key })).statusCode).toBe(200);
      const accepted = await intake('first@b.co');
      expect(accepted.statusCode).toBe(201);
      expect(accepted.headers['ratelimit-remaining']).toBe('0');

      const refusedIntake = await intake('second@b.co');
      expect(refusedIntake.statusCode).toBe(429);
      expect(refusedIntake.json()).toEqual({ error: 'rate_limited' });
      expect((await entities({ id: account.id, apiKey: secondKey.json().key })).statusCode).toBe(429);
    });

    it('does not meter unauthenticated requests or the operator', async () => {
      const refused = await t.request({ method: 'GET', url: '/api/v1/entities', key: 'lk_unknown' });
      expect(refused.statusCode).toBe(401);
      const operator = await t.request({ method: 'GET', url: '/admin/v1/accounts', key: ADMIN_TOKEN });
      expect(operator.statusCode).toBe(200);
      for (const name of RATE_HEADERS) {
        expect(refused.headers[name]).toBeUndefined();
        expect(operator.headers[name]).toBeUndefined();
      }
    });
  });

  describe('shared through Redis', () => {
    it('has two nodes over one database and one Redis enforce one limit together', async () => {
      const namespace = redisNamespace();
      const warnings: unknown[] = [];
      const nodes: { app: FastifyInstance; limiter: RateLimiter; contract: ContractChecker }[] = [];
      try {
        for (let i = 0; i < 2; i++) {
          const limiter = redisLimiter({ keyPrefix: namespace.keyPrefix }, warnings);
          const app = await buildApp({
            services: t.services,
            adminTokenHash: hashSecret(ADMIN_TOKEN),
            rateLimiter: limiter,
            logger: false,
            checkDatabase: async () => {
              await sql`SELECT 1`.execute(t.db);
            },
          });
          await app.ready();
          nodes.push({ app, limiter, contract: new ContractChecker(app.swagger() as never) });
        }
        const account = await t.createAccount();
        await limitTo(account, 5);
        const statuses: number[] = [];
        const remaining: string[] = [];
        for (let i = 0; i < 6; i++) {
          const node = nodes[i % 2]!;
          const request: InjectOptions = {
            method: 'GET',
            url: '/api/v1/entities',
            headers: { authorization: `Bearer ${account.apiKey}` },
          };
          const answer = await node.app.inject(request);
          node.contract.check('GET', '/api/v1/entities', answer);
          statuses.push(answer.statusCode);
          remaining.push(String(answer.headers['ratelimit-remaining']));
          if (answer.statusCode === 429) {
            expect(answer.json()).toEqual({ error: 'rate_limited' });
            expect(Number(answer.headers['retry-after'])).toBeGreaterThanOrEqual(1);
          }
        }
        expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
        expect(remaining).toEqual(['4', '3', '2', '1', '0', '0']);
        expect(warnings).toEqual([]);
      } finally {
        for (const node of nodes) {
          await node.app.close();
          await node.limiter.close();
        }
        await namespace.clean();
      }
    });
  });
});

describe('the in-process token bucket', () => {
  it('refills continuously at the limit per minute and says when to come back', async () => {
    let now = 0;
    const limiter = createMemoryRateLimiter({ now: () => now });
    for (let i = 0; i < 60; i++) expect((await limiter.take('a', 60)).allowed).toBe(true);
    expect(await limiter.take('a', 60)).toEqual({
      allowed: false,
      limit: 60,
      remaining: 0,
      resetSeconds: 60,
      retryAfterSeconds: 1,
    });
    now += 500;
    expect(await limiter.take('a', 60)).toMatchObject({ allowed: false, retryAfterSeconds: 1 });
    now += 500;
    expect(await limiter.take('a', 60)).toMatchObject({ allowed: true, remaining: 0 });
    now += 30_000;
    expect(await limiter.take('a', 60)).toMatchObject({ allowed: true, remaining: 29 });
    now += 10 * 60_000;
    expect(await limiter.take('a', 60)).toMatchObject({ allowed: true, remaining: 59, resetSeconds: 1 });
  });

  it('keeps a bounded number of buckets, forgetting the least recently used', async () => {
    const limiter = createMemoryRateLimiter({ now: () => 0, maxBuckets: 2 });
    expect((await limiter.take('a', 1)).allowed).toBe(true);
    expect((await limiter.take('b', 1)).allowed).toBe(true);
    expect((await limiter.take('a', 1)).allowed).toBe(false);
    // A third account pushes out `b`, the least recently used; `a` is still remembered.
    expect((await limiter.take('c', 1)).allowed).toBe(true);
    expect((await limiter.take('a', 1)).allowed).toBe(false);
    expect((await limiter.take('b', 1)).allowed).toBe(true);
  });

  it('clamps the bucket to a lowered limit, and never lets a clock step backwards take tokens', async () => {
    let now = 10_000;
    const limiter = createMemoryRateLimiter({ now: () => now });
    expect(await limiter.take('a', 1200)).toMatchObject({ remaining: 1199 });
    expect(await limiter.take('a', 5)).toMatchObject({ allowed: true, limit: 5, remaining: 4 });
    now -= 5_000;
    expect(await limiter.take('a', 5)).toMatchObject({ allowed: true, remaining: 3 });
  });
});

describe('the Redis token bucket', () => {
  it('enforces one limit from two limiter instances (two nodes)', async () => {
    const namespace = redisNamespace();
    const warnings: unknown[] = [];
    const nodeA = redisLimiter({ keyPrefix: namespace.keyPrefix }, warnings);
    const nodeB = redisLimiter({ keyPrefix: namespace.keyPrefix }, warnings);
    try {
      const decisions = [];
      for (let i = 0; i < 10; i++) decisions.push(await (i % 2 === 0 ? nodeA : nodeB).take('acct', 6));
      expect(decisions.map((d) => d.allowed)).toEqual([...Array(6).fill(true), ...Array(4).fill(false)]);
      expect(decisions.map((d) => d.remaining).slice(0, 6)).toEqual([5, 4, 3, 2, 1, 0]);
      expect(decisions.at(-1)).toMatchObject({ limit: 6, remaining: 0, retryAfterSeconds: 10 });
      // Another account has its own bucket.
      expect(await nodeB.take('other', 6)).toMatchObject({ allowed: true, remaining: 5 });
      expect(warnings).toEqual([]);
    } finally {
      await nodeA.close();
      await nodeB.close();
      await namespace.clean();
    }
  });

  it('refills on the Redis clock and lets the key expire once the bucket would be full', async () => {
    const namespace = redisNamespace();
    const limiter = redisLimiter({ keyPrefix: namespace.keyPrefix });
    const redis = new Redis(REDIS_URL);
    const key = `${namespace.keyPrefix}acct`;
    try {
      for (let i = 0; i < 6; i++) expect((await limiter.take('acct', 6)).allowed).toBe(true);
      expect((await limiter.take('acct', 6)).allowed).toBe(false);
      // 6 a minute is a token every 10 s; the empty bucket is full in 60 s, plus a second.
      const ttl = await redis.pttl(key);
      expect(ttl).toBeGreaterThan(55_000);
      expect(ttl).toBeLessThanOrEqual(61_000);
      // Move the bucket's last update 10 s into the past instead of waiting 10 s.
      const at = Number(await redis.hget(key, 'at'));
      await redis.hset(key, 'at', String(at - 10_000));
      expect(await limiter.take('acct', 6)).toMatchObject({ allowed: true, remaining: 0 });
      expect((await limiter.take('acct', 6)).allowed).toBe(false);
    } finally {
      await limiter.close();
      redis.disconnect();
      await namespace.clean();
    }
  });

  it('lets requests through when Redis cannot be reached, warns once, and does not make them wait', async () => {
    const warnings: unknown[] = [];
    // Nothing listens on port 1 of loopback.
    const limiter = createRedisRateLimiter({
      url: 'redis://127.0.0.1:1',
      onUnavailable: (error) => warnings.push(error),
    });
    try {
      expect(await limiter.take('acct', 5)).toMatchObject({ allowed: true, limit: 5, remaining: 5 });
      const started = performance.now();
      for (let i = 0; i < 20; i++) expect((await limiter.take('acct', 5)).allowed).toBe(true);
      // Well below the 500 ms command timeout: a known outage costs requests no waiting.
      expect(performance.now() - started).toBeLessThan(250);
      expect(warnings).toHaveLength(1);
    } finally {
      await limiter.close();
    }
  });
});

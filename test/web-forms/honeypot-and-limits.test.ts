import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.ts';
import { createMemoryRateLimiter, type RateLimiter } from '../../src/http/rate-limit.ts';
import { createRedisRateLimiter } from '../../src/http/rate-limit-redis.ts';
import { hashSecret } from '../../src/lib/credentials.ts';
import { ADMIN_TOKEN, startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { ContractChecker } from '../helpers/contract.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { BROWSER_ACCEPT, createSource, FORM, intakeLog, multipart, recordsOf } from './support.ts';

/** The trap field and the per-source limit of a client address (decisions §13, §9). */
describe.each(TEST_DATABASES)('website forms: honeypot and per-address limit on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  // The limiter's clock stands still unless a test moves it, so no test sleeps.
  let clockMs = 1_000_000;
  beforeAll(async () => {
    t = await startTestApp(kind, { rateLimiter: createMemoryRateLimiter({ now: () => clockMs }) });
    account = await accountWithLeads(t);
  });
  afterAll(async () => t?.close());

  const postForm = (
    url: string,
    payload: string,
    headers: Record<string, string> = {},
    remoteAddress?: string,
  ) =>
    t.request({ method: 'POST', url, headers: { 'content-type': FORM, ...headers }, payload, remoteAddress });

  describe('happy path', () => {
    it('stores a post whose trap is empty, without reporting the trap as a field', async () => {
      const source = await createSource(t, account);
      const answer = await postForm(source.url, 'entity=lead&fields%5Bemail%5D=human%40b.co&_hp=');
      expect(answer.statusCode).toBe(201);
      expect(answer.json().warnings).toEqual([]);
      const json = await t.request({
        method: 'POST',
        url: source.url,
        body: { entity: 'lead', fields: { email: 'human2@b.co' }, _hp: '' },
      });
      expect(json.statusCode).toBe(201);
      expect(json.json().warnings).toEqual([]);
      // A list of no values, or of blanks only (a form's repeated empty trap), is empty too.
      const before = (await recordsOf(t, account)).length;
      for (const [index, trap] of [[], ['', ' ']].entries()) {
        const listed = await t.request({
          method: 'POST',
          url: source.url,
          body: { entity: 'lead', fields: { email: `human-list${index}@b.co` }, _hp: trap },
        });
        expect(listed.statusCode).toBe(201);
        expect(listed.json().warnings).toEqual([]);
      }
      expect((await recordsOf(t, account)).length).toBe(before + 2);
    });

    it('answers a filled trap exactly like a success, in every encoding, storing nothing but a spam entry', async () => {
      const source = await createSource(t, account);
      const before = (await recordsOf(t, account)).length;
      const human = await postForm(source.url, 'entity=lead&fields%5Bemail%5D=real%40b.co');
      const form = await postForm(
        source.url,
        'entity=lead&fields%5Bemail%5D=bot%40b.co&_hp=http%3A%2F%2Fspam',
      );
      const body = multipart([
        { name: 'entity', value: 'lead' },
        { name: 'fields[email]', value: 'bot2@b.co' },
        { name: '_hp', value: 'filled' },
      ]);
      const multi = await t.request({
        method: 'POST',
        url: source.url,
        headers: { 'content-type': body.contentType },
        payload: body.payload,
      });
      const json = await t.request({
        method: 'POST',
        url: source.url,
        body: { entity: 'lead', fields: { email: 'bot3@b.co' }, _hp: 'x' },
      });
      for (const spam of [form, multi, json]) {
        expect(spam.statusCode).toBe(human.statusCode);
        expect(Object.keys(spam.json()).sort()).toEqual(Object.keys(human.json()).sort());
        expect(spam.json()).toMatchObject({ entity: 'lead', created: true, updated: false, warnings: [] });
        // Time-ordered as a real record's id (version 7), so that its form gives nothing away.
        expect(spam.json().id).toMatch(
          /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
        );
        expect(human.json().id.charAt(14)).toBe('7');
        expect(spam.json().id).not.toBe(human.json().id);
      }
      expect((await recordsOf(t, account)).length).toBe(before + 1);
      const log = await intakeLog(t, account);
      expect(log.slice(0, 4).map((entry) => entry.outcome)).toEqual(['spam', 'spam', 'spam', 'created']);
      expect(log[0]).toMatchObject({ record_id: null, status_code: 201, endpoint: 'in', entity: 'lead' });
    });

    it('warns a filled trap of what a real post of the same body is warned of', async () => {
      const source = await createSource(t, account);
      // Unknown fields and meta keys: unmapped warnings, in the same order, in both encodings.
      const fields =
        'entity=lead&fields%5Bemail%5D={email}&shoe_size=44&fields%5Bcolour%5D=red&meta%5Bcampaign%5D=x';
      const human = await postForm(source.url, fields.replace('{email}', 'warned%40b.co'));
      const spam = await postForm(source.url, `${fields.replace('{email}', 'bot%40b.co')}&_hp=x`);
      expect(human.statusCode).toBe(201);
      expect(human.json().warnings.length).toBeGreaterThanOrEqual(3);
      expect(spam.json().warnings).toEqual(human.json().warnings);
      const body = { entity: 'lead', fields: { email: 'j@b.co', colour: 'red' }, shoe_size: 44 };
      const jsonHuman = await t.request({ method: 'POST', url: source.url, body });
      const jsonSpam = await t.request({ method: 'POST', url: source.url, body: { ...body, _hp: 'x' } });
      expect(jsonHuman.statusCode, jsonHuman.body).toBe(201);
      expect(jsonSpam.json().warnings).toEqual(jsonHuman.json().warnings);
      expect(jsonSpam.json().warnings).toContainEqual({ key: 'colour', reason: 'unmapped' });
      // The spam entry of the log keeps them too.
      expect((await intakeLog(t, account))[0]).toMatchObject({
        outcome: 'spam',
        warnings: jsonHuman.json().warnings,
      });
      // A body the service would refuse gets no warnings of the entity (nor a 422).
      const refused = await t.request({
        method: 'POST',
        url: source.url,
        body: { entity: 'nothing', fields: { colour: 'red' }, _hp: 'x' },
      });
      expect(refused.statusCode).toBe(201);
      expect(refused.json().warnings).toEqual([]);
    });

    it('gives a browser the same redirect or page for a filled trap as for a real post', async () => {
      const redirecting = await createSource(t, account, { success_url: 'https://www.example.com/danke' });
      const headers = { accept: BROWSER_ACCEPT };
      const real = await postForm(redirecting.url, 'entity=lead&fields%5Bemail%5D=r%40b.co', headers);
      const spam = await postForm(redirecting.url, 'entity=lead&fields%5Bemail%5D=s%40b.co&_hp=1', headers);
      expect(spam.statusCode).toBe(303);
      expect(real.statusCode).toBe(303);
      const spamId = new URL(String(spam.headers.location)).searchParams.get('id');
      expect(spamId).toMatch(/^[0-9a-f-]{36}$/);
      expect(String(spam.headers.location).replace(spamId!, 'ID')).toBe(
        String(real.headers.location).replace(
          new URL(String(real.headers.location)).searchParams.get('id')!,
          'ID',
        ),
      );
      const paged = await createSource(t, account);
      const realPage = await postForm(paged.url, 'entity=lead&fields%5Bemail%5D=p%40b.co', headers);
      const spamPage = await postForm(paged.url, 'entity=lead&fields%5Bemail%5D=q%40b.co&_hp=1', headers);
      expect(spamPage.statusCode).toBe(realPage.statusCode);
      expect(spamPage.body).toBe(realPage.body);
    });

    it('answers a trap even when the rest of the body would be refused', async () => {
      const source = await createSource(t, account);
      const spam = await postForm(source.url, 'entity=lead&_hp=x');
      expect(spam.statusCode).toBe(201);
      expect((await intakeLog(t, account))[0]?.outcome).toBe('spam');
      // A name a real post is refused for is not echoed in a warning, nor kept in the log.
      const long = multipart([
        { name: 'entity', value: 'lead' },
        { name: `${'k'.repeat(101)}`, value: 'x', filename: 'x.txt' },
        { name: 'cv', value: 'x', filename: 'cv.txt' },
        { name: '_hp', value: 'x' },
      ]);
      const named = await t.request({
        method: 'POST',
        url: source.url,
        headers: { 'content-type': long.contentType },
        payload: long.payload,
      });
      expect(named.statusCode).toBe(201);
      expect(named.json().warnings).toEqual([expect.objectContaining({ key: 'cv', reason: 'inline_file' })]);
      expect((await intakeLog(t, account))[0]?.warnings).toEqual(named.json().warnings);
    });

    it('uses the source’s own trap field, or none', async () => {
      const named = await createSource(t, account, { honeypot_field: 'website' });
      const before = (await recordsOf(t, account)).length;
      const spam = await postForm(named.url, 'entity=lead&fields%5Bemail%5D=w%40b.co&website=x');
      expect(spam.statusCode).toBe(201);
      const underscore = await postForm(named.url, 'entity=lead&fields%5Bemail%5D=u%40b.co&_hp=x');
      expect(underscore.statusCode).toBe(201);
      expect(underscore.json().warnings).toEqual([
        expect.objectContaining({ key: '_hp', reason: 'unmapped' }),
      ]);
      const none = await createSource(t, account, { honeypot_field: null });
      const taken = await postForm(none.url, 'entity=lead&fields%5Bemail%5D=n%40b.co&_hp=x');
      expect(taken.json().warnings).toEqual([expect.objectContaining({ key: '_hp', reason: 'unmapped' })]);
      expect((await recordsOf(t, account)).length).toBe(before + 2);
    });
  });

  describe('errors', () => {
    it('answers 429 with Retry-After past the per-address limit, per source and per address', async () => {
      const source = await createSource(t, account, { rate_limit_per_minute: 3 });
      const other = await createSource(t, account, { rate_limit_per_minute: 3 });
      const send = (url: string, address: string, n: number) =>
        postForm(url, `entity=lead&fields%5Bemail%5D=limit${n}%40b.co`, {}, address);
      const statuses: number[] = [];
      for (let n = 0; n < 4; n++) statuses.push((await send(source.url, '203.0.113.5', n)).statusCode);
      expect(statuses).toEqual([201, 201, 201, 429]);
      const refused = await send(source.url, '203.0.113.5', 9);
      expect(refused.json()).toEqual({ error: 'rate_limited' });
      expect(Number(refused.headers['retry-after'])).toBe(20);
      expect(refused.headers['ratelimit-limit']).toBe('3');
      // Another address, and another source for the same address, have their own allowance.
      expect((await send(source.url, '203.0.113.6', 10)).statusCode).toBe(201);
      expect((await send(other.url, '203.0.113.5', 11)).statusCode).toBe(201);
      // The bucket refills: one post every 20 s.
      clockMs += 20_000;
      expect((await send(source.url, '203.0.113.5', 12)).statusCode).toBe(201);
      expect((await send(source.url, '203.0.113.5', 13)).statusCode).toBe(429);
    });

    it('shows a browser past the limit a page with the wait, or its error_url', async () => {
      const source = await createSource(t, account, { rate_limit_per_minute: 1 });
      const headers = { accept: BROWSER_ACCEPT, 'accept-language': 'de' };
      await postForm(source.url, 'entity=lead&fields%5Bemail%5D=b1%40b.co', headers, '198.51.100.7');
      const page = await postForm(
        source.url,
        'entity=lead&fields%5Bemail%5D=b2%40b.co',
        headers,
        '198.51.100.7',
      );
      expect(page.statusCode).toBe(429);
      expect(page.headers['retry-after']).toBe('60');
      expect(page.body).toContain('in 60 Sekunden erneut');
      await t.request({
        method: 'PATCH',
        url: `/api/v1/settings/sources/${source.id}`,
        key: account.apiKey,
        body: { error_url: 'https://www.example.com/oops' },
      });
      const redirected = await postForm(
        source.url,
        'entity=lead&fields%5Bemail%5D=b3%40b.co',
        headers,
        '198.51.100.7',
      );
      expect(redirected.statusCode).toBe(303);
      expect(redirected.headers.location).toBe('https://www.example.com/oops?error=rate_limited');
    });
  });

  describe('security', () => {
    it('counts trapped posts against the address’s limit, so a bot cannot post without end', async () => {
      const source = await createSource(t, account, { rate_limit_per_minute: 2 });
      const spam = () => postForm(source.url, 'entity=lead&_hp=x', {}, '192.0.2.44');
      expect([(await spam()).statusCode, (await spam()).statusCode, (await spam()).statusCode]).toEqual([
        201, 201, 429,
      ]);
    });

    it('replays a trapped post repeated with its idempotency key, as a real post is, storing nothing', async () => {
      const source = await createSource(t, account);
      const before = (await recordsOf(t, account)).length;
      const real = 'entity=lead&fields%5Bemail%5D=keyed%40b.co&meta%5Bidempotency_key%5D=real-1';
      const realFirst = await postForm(source.url, real);
      const realAgain = await postForm(source.url, real);
      const trapped = 'entity=lead&fields%5Bemail%5D=keyed-bot%40b.co&meta%5Bidempotency_key%5D=bot-1&_hp=x';
      const first = await postForm(source.url, trapped);
      const again = await postForm(source.url, trapped);
      expect(realAgain.headers['idempotent-replayed']).toBe('true');
      expect(realAgain.json().id).toBe(realFirst.json().id);
      expect([first.statusCode, again.statusCode]).toEqual([201, 201]);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.json()).toEqual(first.json());
      // The key in the header, in JSON: the same.
      const headers = { 'idempotency-key': 'bot-2' };
      const body = { entity: 'lead', fields: { email: 'keyed-bot2@b.co' }, _hp: 'x' };
      const json = await t.request({ method: 'POST', url: source.url, headers, body });
      const jsonAgain = await t.request({ method: 'POST', url: source.url, headers, body });
      expect(jsonAgain.headers['idempotent-replayed']).toBe('true');
      expect(jsonAgain.json().id).toBe(json.json().id);
      // Only the real post made a record; every trapped post is a spam entry of the log.
      expect((await recordsOf(t, account)).length).toBe(before + 1);
      const log = await intakeLog(t, account);
      expect(log.slice(0, 4).map((entry) => [entry.outcome, entry.record_id])).toEqual([
        ['spam', null],
        ['spam', null],
        ['spam', null],
        ['spam', null],
      ]);
    });

    it('enforces one per-address limit across two nodes sharing Redis', async () => {
      const keyPrefix = `leads-test:rate:${randomUUID()}:`;
      const nodes: { app: FastifyInstance; limiter: RateLimiter; contract: ContractChecker }[] = [];
      try {
        for (let i = 0; i < 2; i++) {
          const limiter = createRedisRateLimiter({ url: 'redis://127.0.0.1:6379', keyPrefix });
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
        const source = await createSource(t, account, { rate_limit_per_minute: 3 });
        const statuses: number[] = [];
        for (let n = 0; n < 5; n++) {
          const node = nodes[n % 2]!;
          const answer = await node.app.inject({
            method: 'POST',
            url: source.url,
            remoteAddress: '203.0.113.99',
            headers: { 'content-type': FORM },
            payload: `entity=lead&fields%5Bemail%5D=redis${n}%40b.co`,
          });
          node.contract.check('POST', source.url, answer);
          statuses.push(answer.statusCode);
        }
        expect(statuses).toEqual([201, 201, 201, 429, 429]);
      } finally {
        for (const node of nodes) {
          await node.app.close();
          await node.limiter.close();
        }
        const redis = new Redis('redis://127.0.0.1:6379');
        const keys = await redis.keys(`${keyPrefix}*`);
        if (keys.length > 0) await redis.del(...keys);
        redis.disconnect();
      }
    });
  });
});

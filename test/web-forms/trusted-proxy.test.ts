import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { createMemoryRateLimiter } from '../../src/http/rate-limit.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { createSource, FORM } from './support.ts';

/** The client address of the per-address form limit behind a proxy (decisions §13, §14). */
describe('LEADS_TRUST_PROXY', () => {
  const read = (value: string) => loadConfig({ LEADS_TRUST_PROXY: value }).trustProxy;

  it('reads nothing, a switch, a hop count, or addresses, ranges and range names', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(read('')).toBe(false);
    expect(read('true')).toBe(true);
    expect(read('off')).toBe(false);
    expect(read('2')).toBe(2);
    expect(read('loopback, 10.0.0.0/8,2001:db8::1')).toEqual(['loopback', '10.0.0.0/8', '2001:db8::1']);
  });

  it('refuses what is none of these, naming the setting', () => {
    for (const wrong of ['proxy.example.com', '10.0.0.0/99', '101', 'loopback,', '-1']) {
      expect(() => read(wrong), wrong).toThrow(/LEADS_TRUST_PROXY/);
    }
  });
});

describe.each([
  ['without a trusted proxy', undefined, 'the connection address'],
  ['trusting the loopback proxy', ['loopback'], 'the forwarded address'],
] as const)('the per-address form limit %s', (_label, trustProxy, counted) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp('pglite', {
      trustProxy: trustProxy ? [...trustProxy] : undefined,
      rateLimiter: createMemoryRateLimiter({ now: () => 1_000_000 }),
    });
    account = await accountWithLeads(t);
  });
  afterAll(async () => t?.close());

  it(`counts ${counted}`, async () => {
    const source = await createSource(t, account, { rate_limit_per_minute: 1 });
    const post = (visitor: string, n: number) =>
      t.request({
        method: 'POST',
        url: source.url,
        remoteAddress: '127.0.0.1',
        headers: { 'content-type': FORM, 'x-forwarded-for': visitor },
        payload: `entity=lead&fields%5Bemail%5D=visitor${n}%40b.co`,
      });
    const first = await post('203.0.113.1', 1);
    const second = await post('203.0.113.2', 2);
    const again = await post('203.0.113.1', 3);
    expect(first.statusCode).toBe(201);
    // Behind the proxy two visitors are two addresses; without trust they are the proxy's one.
    expect(second.statusCode).toBe(trustProxy ? 201 : 429);
    expect(again.statusCode).toBe(429);
  });
});

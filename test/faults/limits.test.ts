import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/http/errors.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

describe.each(TEST_DATABASES)('request limits and hostile bodies on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;

  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t);
  });
  afterAll(async () => t?.close());

  const post = (url: string, payload: string, contentType = 'application/json') =>
    t.request({
      method: 'POST',
      url,
      key: account.apiKey,
      headers: { 'content-type': contentType },
      payload,
    });

  it('answers 413 payload_too_large above 1 MiB on a single call, and takes up to 16 MiB on bulk', async () => {
    const big = JSON.stringify({
      entity: 'lead',
      fields: { email: 'a@b.co', message: 'x'.repeat(1024 * 1024) },
    });
    const single = await post('/api/v1/records', big);
    expect(single.statusCode).toBe(413);
    expect(single.json()).toEqual({ error: 'payload_too_large' });

    const records = Array.from({ length: 20 }, (_, i) => ({
      entity: 'lead',
      fields: { email: `bulk${i}@b.co`, message: 'y'.repeat(90_000) },
    }));
    const bulk = await post('/api/v1/records/bulk', JSON.stringify({ records }));
    expect(bulk.statusCode).toBe(200);
    expect(bulk.json().accepted).toBe(20);
  });

  it('refuses JSON nested deeper than 32 levels with 400 invalid_body', async () => {
    let nested: unknown = 'deep';
    for (let i = 0; i < 40; i++) nested = { a: nested };
    const response = await post(
      '/api/v1/records',
      JSON.stringify({ entity: 'lead', fields: { email: 'n@b.co' }, meta: nested }),
    );
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: 'invalid_body' });
  });

  it('keeps __proto__ and constructor keys as data and pollutes no prototype', async () => {
    const payload =
      '{"entity":"lead","fields":{"email":"p@b.co","__proto__":{"polluted":1},"constructor":{"prototype":{"polluted":2}}},"__proto__":{"polluted":3}}';
    const response = await post('/api/v1/records', payload);
    expect(response.statusCode).toBe(201);
    const keys = response
      .json()
      .warnings.map((w: { key: string }) => w.key)
      .sort();
    expect(keys).toEqual(['__proto__', '__proto__', 'constructor']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect((Object.prototype as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('answers 415 for content types other than JSON and forms, and 400 for malformed JSON', async () => {
    const text = await post('/api/v1/records', 'entity=lead', 'text/plain');
    expect(text.statusCode).toBe(415);
    expect(text.json()).toEqual({ error: 'unsupported_media_type' });
    const xml = await post('/api/v1/records', '<lead/>', 'application/xml');
    expect(xml.statusCode).toBe(415);
    const broken = await post('/api/v1/records', '{"entity": "lead",');
    expect(broken.statusCode).toBe(400);
    expect(broken.json()).toEqual({ error: 'invalid_body' });
    const form = await post(
      '/api/v1/records',
      'entity=lead&email=f%40b.co',
      'application/x-www-form-urlencoded',
    );
    // Forms are an encoding of the intake routes only (the document lists them there).
    expect(form.statusCode).toBe(415);
    expect(form.json()).toEqual({ error: 'unsupported_media_type' });
  });

  it('answers 415 for a body in a content coding, coded or not, and writes nothing', async () => {
    const plain = JSON.stringify({ entity: 'lead', fields: { email: 'coded@b.co' } });
    for (const [coding, payload] of [
      ['gzip', gzipSync(plain)],
      ['gzip', plain],
      ['br', plain],
    ] as const) {
      const response = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        headers: { 'content-type': 'application/json', 'content-encoding': coding },
        payload,
      });
      expect(response.statusCode).toBe(415);
      expect(response.json().error).toBe('unsupported_media_type');
    }
    const identity = await t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: account.apiKey,
      headers: { 'content-type': 'application/json', 'content-encoding': 'identity' },
      payload: plain,
    });
    expect(identity.statusCode).toBe(201);
  });

  it('answers every refusal with a code from the closed list', async () => {
    const bodies = [
      'null',
      '[]',
      '"x"',
      '{}',
      '{"entity":5}',
      '{"entity":"lead","fields":[]}',
      '{"entity":"lead","meta":"x"}',
    ];
    for (const body of bodies) {
      const response = await post('/api/v1/records', body);
      expect(response.statusCode).toBeGreaterThanOrEqual(400);
      expect(response.statusCode).toBeLessThan(500);
      expect(ERROR_CODES).toContain(response.json().error);
    }
  });
});

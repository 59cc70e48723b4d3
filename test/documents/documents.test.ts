import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { documentSignature } from '../../src/modules/auth/auth.service.ts';
import { startTestApp, TEST_SECRET, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { LEAD_ENTITY, putEntity } from '../helpers/fixtures.ts';

const PDF = Buffer.from('%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n');
const TEXT = Buffer.from('plain words\n');

const ENTITY = {
  ...LEAD_ENTITY,
  fields: [
    ...LEAD_ENTITY.fields,
    { key: 'attachments', label: 'Attachments', type: 'files' },
    { key: 'contract', label: 'Contract', type: 'file' },
  ],
};

describe.each(TEST_DATABASES)('documents on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  let server: http.Server;
  let base: string;
  let hits: string[];

  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await t.createAccount();
    await putEntity(t, account, 'lead', ENTITY);
    server = http.createServer((req, res) => {
      hits.push(req.url ?? '');
      if (req.url === '/offer.pdf') return res.writeHead(200, { 'content-type': 'text/html' }).end(PDF);
      // The entity definitions expire from the cache while this document is fetched: the write
      // that follows must read them inside its own transaction.
      if (req.url === '/stale.pdf') {
        t.services.entities.invalidate(account.id);
        return res.writeHead(200).end(PDF);
      }
      if (req.url === '/notes')
        return res.writeHead(200, { 'content-disposition': 'attachment; filename="Notes 1.txt"' }).end(TEXT);
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  beforeEach(() => {
    hits = [];
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await t?.close();
  });

  const intake = (body: object, key = account.apiKey) =>
    t.request({ method: 'POST', url: '/api/v1/records', key, body: { entity: 'lead', ...body } });
  const download = (url: string, key?: string) =>
    t.app.inject({ method: 'GET', url, headers: key ? { authorization: `Bearer ${key}` } : {} });
  /** A record token opening the given fields of a record. */
  const tokenFor = async (id: string, fields: string[]) =>
    (
      await t.request({
        method: 'POST',
        url: `/api/v1/records/${id}/tokens`,
        key: account.apiKey,
        body: { fields },
      })
    ).json().token as string;
  /** Documents attached with a record token (PATCH /api/v1/records). */
  const attachByToken = (token: string, documents: object[]) =>
    t.request({ method: 'PATCH', url: '/api/v1/records', key: token, body: { documents } });

  describe('happy path', () => {
    it('attaches a document when the entity definitions expired from the cache during its fetch', async () => {
      // On the embedded database a look-up outside the write's transaction waits for the one
      // connection that transaction holds: the request would never be answered.
      const created = await Promise.race([
        intake({
          fields: { email: 'stale@b.co' },
          documents: [{ url: `${base}/stale.pdf`, field: 'contract' }],
        }),
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error('no answer within 10 s')), 10_000),
        ),
      ]);
      expect(created.statusCode).toBe(201);
      const record = (
        await t.request({ method: 'GET', url: `/api/v1/records/${created.json().id}`, key: account.apiKey })
      ).json();
      expect(record.documents).toEqual([
        expect.objectContaining({ field: 'contract', mime: 'application/pdf' }),
      ]);
    });

    it('fetches documents into a field and the pool, and serves them byte-identical with safe headers', async () => {
      const created = await intake({
        fields: { email: 'doc@b.co' },
        documents: [{ url: `${base}/offer.pdf`, field: 'attachments' }, { url: `${base}/notes` }],
      });
      expect(created.statusCode).toBe(201);
      expect(created.json().warnings).toEqual([]);
      const record = (
        await t.request({ method: 'GET', url: `/api/v1/records/${created.json().id}`, key: account.apiKey })
      ).json();
      const pdf = record.documents.find((d: { name: string }) => d.name === 'offer.pdf');
      const text = record.documents.find((d: { name: string }) => d.name === 'Notes 1.txt');
      expect(pdf).toMatchObject({
        mime: 'application/pdf',
        size: PDF.length,
        field: 'attachments',
        url: `/api/v1/documents/${pdf.id}`,
      });
      expect(text).toMatchObject({ mime: 'text/plain', size: TEXT.length });
      expect(text).not.toHaveProperty('field');

      const response = await download(pdf.url, account.apiKey);
      expect(response.statusCode).toBe(200);
      expect(response.rawPayload.equals(PDF)).toBe(true);
      expect(response.headers['content-type']).toBe('application/pdf');
      expect(response.headers['content-disposition']).toMatch(/^attachment; filename="offer.pdf"/);
      expect(response.headers['content-security-policy']).toBe('sandbox');
      expect(response.headers['cache-control']).toBe('no-store, private');
      expect(response.headers['x-content-type-options']).toBe('nosniff');
      const events = await t.db
        .selectFrom('record_events')
        .select('type')
        .where('record_id', '=', record.id)
        .execute();
      expect(events.filter((e) => e.type === 'document_attached')).toHaveLength(2);
    });

    it('issues signed addresses valid for that document only, for 30 minutes', async () => {
      const created = await intake({
        fields: { email: 'sign@b.co' },
        documents: [{ url: `${base}/offer.pdf` }, { url: `${base}/notes` }],
      });
      const [a, b] = (
        await t.request({ method: 'GET', url: `/api/v1/records/${created.json().id}`, key: account.apiKey })
      ).json().documents;
      const signed = await t.request({ method: 'POST', url: `${a.url}/signed-url`, key: account.apiKey });
      expect(signed.statusCode).toBe(200);
      const url = new URL(signed.json().url);
      const expires = Date.parse(signed.json().expires_at) - Date.now();
      expect(expires).toBeGreaterThan(29 * 60_000);
      expect(expires).toBeLessThanOrEqual(30 * 60_000);
      expect((await download(url.pathname + url.search)).statusCode).toBe(200);

      const exp = url.searchParams.get('exp')!;
      const tampered = `${url.pathname}?exp=${exp}&sig=${url.searchParams.get('sig')!.slice(0, -2)}xx`;
      expect((await download(tampered)).statusCode).toBe(401);
      expect((await download(`${b.url}${url.search}`)).statusCode).toBe(401);
      const past = Math.floor(Date.now() / 1000) - 10;
      expect(
        (await download(`${a.url}?exp=${past}&sig=${documentSignature(TEST_SECRET, a.id, past)}`)).statusCode,
      ).toBe(401);
      const tooLong = Math.floor(Date.now() / 1000) + 24 * 3600;
      expect(
        (await download(`${a.url}?exp=${tooLong}&sig=${documentSignature(TEST_SECRET, a.id, tooLong)}`))
          .statusCode,
      ).toBe(401);
      expect((await download(a.url)).statusCode).toBe(401);
    });

    it('attaches documents on PATCH, and a single-file field keeps the newest', async () => {
      const id = (await intake({ fields: { email: 'patchdoc@b.co' } })).json().id;
      const first = await t.request({
        method: 'PATCH',
        url: `/api/v1/records/${id}`,
        key: account.apiKey,
        body: { documents: [{ url: `${base}/offer.pdf`, field: 'contract' }] },
      });
      expect(first.json()).toMatchObject({ updated: true, documents: 1 });
      await t.request({
        method: 'PATCH',
        url: `/api/v1/records/${id}`,
        key: account.apiKey,
        body: { documents: [{ url: `${base}/notes`, field: 'contract' }] },
      });
      const docs = (
        await t.request({ method: 'GET', url: `/api/v1/records/${id}`, key: account.apiKey })
      ).json().documents;
      expect(docs.map((d: { name: string; field: string }) => `${d.field}:${d.name}`)).toEqual([
        'contract:Notes 1.txt',
      ]);
    });

    it('a PATCH that only attaches a document changes updated_at, so updated_since finds the record', async () => {
      const id = (await intake({ fields: { email: 'polled@b.co' } })).json().id;
      const read = async () =>
        (await t.request({ method: 'GET', url: `/api/v1/records/${id}`, key: account.apiKey })).json();
      const before = (await read()).updated_at;
      await new Promise((resolve) => setTimeout(resolve, 5));
      const since = new Date().toISOString();
      const patched = await t.request({
        method: 'PATCH',
        url: `/api/v1/records/${id}`,
        key: account.apiKey,
        body: { documents: [{ url: `${base}/offer.pdf` }] },
      });
      expect(patched.json()).toMatchObject({ updated: true, fields: [], documents: 1 });
      expect(Date.parse((await read()).updated_at)).toBeGreaterThan(Date.parse(before));
      const polled = await t.request({
        method: 'GET',
        url: `/api/v1/records?updated_since=${encodeURIComponent(since)}`,
        key: account.apiKey,
      });
      expect(polled.json().records.map((r: { id: string }) => r.id)).toEqual([id]);
    });

    it('fetches at most 20 documents for one bulk call: the entry that would pass them is refused alone', async () => {
      const docs = Array.from({ length: 8 }, () => ({ url: `${base}/offer.pdf` }));
      const entry = (email: string) => ({ entity: 'lead', fields: { email }, documents: docs });
      const response = await t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key: account.apiKey,
        body: {
          records: [
            entry('bulkdoc1@b.co'),
            // A body its schema refuses fetches nothing and counts nothing.
            { entity: 'lead', fields: { email: 'bulkdoc2@b.co' }, documents: docs, note: 42 },
            entry('bulkdoc3@b.co'),
            entry('bulkdoc4@b.co'),
            { entity: 'lead', fields: { email: 'bulkdoc5@b.co' } },
          ],
        },
      });
      expect(response.statusCode).toBe(200);
      const { accepted, results } = response.json();
      expect(accepted).toBe(3);
      expect(results[1]).toMatchObject({ error: 'validation_failed', details: [{ key: 'note' }] });
      expect(results[3]).toEqual({
        error: 'validation_failed',
        details: [
          {
            key: 'documents',
            reason: 'too_many',
            message: 'at most 20 documents per call, counted over its entries in order',
          },
        ],
      });
      expect(hits).toHaveLength(16);
      for (const index of [0, 2]) {
        const record = await t.request({
          method: 'GET',
          url: `/api/v1/records/${results[index].id}`,
          key: account.apiKey,
        });
        expect(record.json().documents).toHaveLength(8);
      }
    });

    it('lets a record token attach to the file fields it opens, never to the pool', async () => {
      const id = (await intake({ fields: { email: 'tokdoc@b.co' } })).json().id;
      const one = await tokenFor(id, ['contract']);
      const attached = await attachByToken(one, [{ url: `${base}/offer.pdf` }]);
      expect(attached.json()).toMatchObject({ documents: 1, warnings: [] });
      const outside = await attachByToken(one, [{ url: `${base}/offer.pdf`, field: 'attachments' }]);
      expect(outside.json()).toMatchObject({
        documents: 0,
        warnings: [{ key: 'attachments', reason: 'not_in_scope' }],
      });
      const two = await tokenFor(id, ['contract', 'attachments']);
      const ambiguous = await attachByToken(two, [{ url: `${base}/notes` }]);
      expect(ambiguous.statusCode).toBe(422);
      const none = await tokenFor(id, ['phone']);
      const pool = await attachByToken(none, [{ url: `${base}/notes` }]);
      expect(pool.json()).toMatchObject({ documents: 0, warnings: [{ reason: 'not_in_scope' }] });
    });
  });

  describe('errors', () => {
    it('creates the record with a document_unavailable warning when a document cannot be fetched', async () => {
      const created = await intake({
        fields: { email: 'missing@b.co' },
        documents: [{ url: `${base}/gone.pdf`, field: 'attachments' }],
      });
      expect(created.statusCode).toBe(201);
      expect(created.json().warnings).toEqual([
        { key: 'attachments', reason: 'document_unavailable', message: 'http_404' },
      ]);
    });

    it('refuses a document for a field that is not a file field, and more than 20 documents', async () => {
      expect(
        (await intake({ fields: { email: 'f@b.co' }, documents: [{ url: `${base}/notes`, field: 'email' }] }))
          .statusCode,
      ).toBe(422);
      const many = Array.from({ length: 21 }, () => ({ url: `${base}/notes` }));
      expect((await intake({ fields: { email: 'm@b.co' }, documents: many })).statusCode).toBe(422);
    });

    it('refuses two documents for one single-file field in one call, before fetching either', async () => {
      const twice = [
        { url: `${base}/offer.pdf`, field: 'contract' },
        { url: `${base}/notes`, field: 'attachments' },
        { url: `${base}/notes`, field: 'contract' },
      ];
      const created = await intake({ fields: { email: 'twice@b.co' }, documents: twice });
      expect(created.statusCode).toBe(422);
      expect(created.json().details).toEqual([
        {
          key: 'documents.2.field',
          reason: 'too_many',
          message: 'contract holds one document, and documents.0 goes there too',
        },
      ]);
      const id = (await intake({ fields: { email: 'twice-patch@b.co' } })).json().id;
      const patched = await t.request({
        method: 'PATCH',
        url: `/api/v1/records/${id}`,
        key: account.apiKey,
        body: { documents: twice },
      });
      expect(patched.statusCode).toBe(422);
      // A record token opening only the single-file field names it for every document.
      const token = await tokenFor(id, ['contract']);
      const byToken = await attachByToken(token, [{ url: `${base}/offer.pdf` }, { url: `${base}/notes` }]);
      expect(byToken.statusCode).toBe(422);
      expect(byToken.json().details[0]).toMatchObject({ key: 'documents.1.field', reason: 'too_many' });
      expect(hits).toEqual([]);
      // A `files` field collects: two documents for it are taken.
      const collected = await intake({
        fields: { email: 'twice-files@b.co' },
        documents: [
          { url: `${base}/offer.pdf`, field: 'attachments' },
          { url: `${base}/notes`, field: 'attachments' },
        ],
      });
      expect(collected.json()).toMatchObject({ warnings: [] });
      const docs = (
        await t.request({ method: 'GET', url: `/api/v1/records/${collected.json().id}`, key: account.apiKey })
      ).json().documents;
      expect(docs).toHaveLength(2);
    });
  });

  describe('security', () => {
    it("answers 404 for another account's document", async () => {
      const created = await intake({ fields: { email: 'mine@b.co' }, documents: [{ url: `${base}/notes` }] });
      const doc = (
        await t.request({ method: 'GET', url: `/api/v1/records/${created.json().id}`, key: account.apiKey })
      ).json().documents[0];
      const other = await t.createAccount();
      expect((await download(doc.url, other.apiKey)).statusCode).toBe(404);
      expect(
        (await t.request({ method: 'POST', url: `${doc.url}/signed-url`, key: other.apiKey })).statusCode,
      ).toBe(404);
    });

    it('does not fetch from private addresses unless allowed, and the target sees nothing', async () => {
      const strict = await startTestApp(kind, { fetchAllowPrivate: false });
      try {
        const owner = await strict.createAccount();
        await putEntity(strict, owner, 'lead', ENTITY);
        const created = await strict.request({
          method: 'POST',
          url: '/api/v1/records',
          key: owner.apiKey,
          body: { entity: 'lead', fields: { email: 'ssrf@b.co' }, documents: [{ url: `${base}/offer.pdf` }] },
        });
        expect(created.statusCode).toBe(201);
        expect(created.json().warnings).toEqual([
          { key: `${base}/offer.pdf`, reason: 'document_unavailable', message: 'blocked_address' },
        ]);
        expect(hits).toEqual([]);
      } finally {
        await strict.close();
      }
    });
  });
});

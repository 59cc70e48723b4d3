import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkIdempotencyKey } from '../../src/modules/idempotency/idempotency.service.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

type Doc = {
  paths: Record<string, Record<string, any>>;
  components: { schemas: Record<string, unknown> };
};

/** Rules the service enforces, each stated in the served document and answered as it says. */
describe.each(TEST_DATABASES)('rules stated in the OpenAPI document on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  /** An account with the modules whose operations take an optional body. */
  let modules: TestAccount;
  let doc: Doc;
  let recordId: string;
  let ajv: Ajv2020;

  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t);
    modules = await t.createAccount({ modules: ['distribution', 'booking'] });
    doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json();
    ajv = new Ajv2020({ strict: false });
    (addFormats as unknown as (ajv: unknown) => void)(ajv);
    ajv.addSchema({ $id: 'openapi', components: doc.components });
    recordId = (
      await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: { entity: 'lead', fields: { email: 'rules@b.co' } },
      })
    ).json().id;
  });
  afterAll(async () => t?.close());

  const bodySchema = (path: string, method: string, media = 'application/json') =>
    doc.paths[path]![method]!.requestBody.content[media].schema;
  const parameter = (path: string, method: string, name: string) =>
    (doc.paths[path]![method]!.parameters as { name: string; schema: any }[]).find((p) => p.name === name)!;
  const validBy = (schema: unknown) => {
    const validate = ajv.compile(
      JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"openapi#/components/')),
    );
    return (value: unknown) => validate(value) as boolean;
  };
  const call = (
    method: 'GET' | 'POST' | 'PUT',
    url: string,
    body?: unknown,
    headers?: Record<string, string>,
  ) => t.request({ method, url, key: account.apiKey, body, headers });

  describe('happy path', () => {
    it('lists the form encoding where forms are taken', () => {
      expect(Object.keys(doc.paths['/api/intake']!.post.requestBody.content).sort()).toEqual([
        'application/json',
        'application/x-www-form-urlencoded',
      ]);
      expect(Object.keys(doc.paths['/api/v1/in/{token}']!.post.requestBody.content).sort()).toEqual([
        'application/json',
        'application/x-www-form-urlencoded',
        'multipart/form-data',
      ]);
    });

    it('marks a body as optional only where every key is, and takes such a request without one', async () => {
      const optional = Object.entries(doc.paths).flatMap(([path, methods]) =>
        Object.entries(methods as Record<string, { requestBody?: { required?: boolean } }>)
          .filter(([, operation]) => operation.requestBody?.required === false)
          .map(([method]) => `${method} ${path}`),
      );
      expect(optional.sort()).toEqual([
        'post /api/v1/booking/appointments/{id}/cancel',
        'post /api/v1/distribution/deliveries/{id}/return',
      ]);
      for (const entry of optional) {
        const [method, path] = entry.split(' ') as [string, string];
        expect(bodySchema(path, method).required ?? []).toEqual([]);
      }
      // No body reaches the handler (an unknown id), where a required body would be 422.
      const unknown = '00000000-0000-4000-8000-000000000000';
      for (const url of [
        `/api/v1/distribution/deliveries/${unknown}/return`,
        `/api/v1/booking/appointments/${unknown}/cancel`,
      ]) {
        const response = await t.request({ method: 'POST', url, key: modules.apiKey });
        expect(response.statusCode, url).toBe(404);
      }
    });

    it('declares the document download as any media type, and answers with the file’s own', async () => {
      const content = doc.paths['/api/v1/documents/{id}']!.get.responses['200'].content;
      expect(Object.keys(content)).toEqual(['*/*']);
      const server = http.createServer((_req, res) => res.writeHead(200).end('plain words\n'));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const port = (server.address() as AddressInfo).port;
        const created = await call('POST', '/api/v1/records', {
          entity: 'lead',
          fields: { email: 'doc@b.co' },
          documents: [{ url: `http://127.0.0.1:${port}/notes.txt` }],
        });
        const record = (
          await t.request({ method: 'GET', url: `/api/v1/records/${created.json().id}`, key: account.apiKey })
        ).json();
        const download = await t.request({
          method: 'GET',
          url: record.documents[0].url,
          key: account.apiKey,
        });
        expect(download.statusCode).toBe(200);
        expect(download.headers['content-type']).toMatch(/^text\/plain/);
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    });

    it('types the known meta keys and the notes 409 body', () => {
      const meta = bodySchema('/api/v1/records', 'post').properties.meta;
      expect(Object.keys(meta.properties)).toEqual(
        expect.arrayContaining([
          'source',
          'idempotency_key',
          'external_id',
          'utm_source',
          'gclid',
          'referrer',
        ]),
      );
      expect(
        doc.paths['/api/v1/notes']!.post.responses['409'].content['application/json'].schema.properties.ids,
      ).toBeDefined();
    });
  });

  describe('errors', () => {
    it('S1 intake needs entity or lead_object', async () => {
      const schema = bodySchema('/api/intake', 'post');
      expect(schema.anyOf).toEqual([{ required: ['entity'] }, { required: ['lead_object'] }]);
      const response = await call('POST', '/api/intake', { email: 'no-entity@b.co' });
      expect(response.statusCode).toBe(422);
      expect(response.json().errors.entity).toBeDefined();
      expect(
        (await call('POST', '/api/intake', { lead_object: 'lead', email: 'alias@b.co' })).statusCode,
      ).toBe(200);
      // Blanks name no entity: the readable refusal of a blank name, reason required.
      const blank = await call('POST', '/api/intake', { entity: ' \u200B ', email: 'blank@b.co' });
      expect(blank.statusCode).toBe(422);
      expect(blank.json().errors).toEqual({ entity: ['must hold a character other than blanks'] });
      // Both names, naming different entities: refused, not one of them set aside unsaid.
      const both = await call('POST', '/api/intake', {
        entity: 'lead',
        lead_object: 'other',
        email: 'two@b.co',
      });
      expect(both.statusCode).toBe(422);
      expect(both.json().errors.lead_object).toBeDefined();
      expect(
        (await call('POST', '/api/intake', { entity: 'lead', lead_object: 'Lead', email: 'same@b.co' }))
          .statusCode,
      ).toBe(200);
    });

    it('a key the body does not list is named in the detail, on S2 and on S1', async () => {
      const note = await call('POST', '/api/v1/notes', { record: recordId, body: 'x', extra: 1 });
      expect(note.statusCode).toBe(422);
      expect(note.json().details).toEqual([
        { key: 'extra', reason: 'unknown_key', message: 'is not a key of this object' },
      ]);
      const nested = await call('PUT', '/api/v1/settings/entities/nested', {
        name: 'Nested',
        fields: [{ key: 'email', label: 'Email', type: 'text', colour: 'red' }],
      });
      expect(nested.json().details).toEqual([
        expect.objectContaining({ key: 'fields.0.colour', reason: 'unknown_key' }),
      ]);
      const s1 = await t.request({
        method: 'PATCH',
        url: `/api/leads/${recordId}`,
        key: account.apiKey,
        body: { fields: {}, foo: 1 },
      });
      expect(s1.statusCode).toBe(422);
      expect(s1.json().errors).toEqual({ foo: ['is not a key of this object'] });
    });

    it('a note names its record by id or by email', async () => {
      expect(bodySchema('/api/v1/notes', 'post').anyOf).toEqual([
        { required: ['record'] },
        { required: ['email'] },
      ]);
      const response = await call('POST', '/api/v1/notes', { body: 'x' });
      expect(response.statusCode).toBe(422);
      expect(response.json().details).toEqual([
        expect.objectContaining({ key: 'record', reason: 'required' }),
      ]);
    });

    it('an Idempotency-Key header states its characters and answers 400 outside them', async () => {
      for (const path of ['/api/v1/records', '/api/v1/records/bulk', '/api/v1/notes', '/api/v1/in/{token}']) {
        const header = parameter(path, 'post', 'idempotency-key');
        expect(header.schema.pattern, path).toBeDefined();
        expect(header.schema.maxLength, path).toBe(255);
        expect(doc.paths[path]!.post.responses['400'], path).toBeDefined();
      }
      const refused = await call(
        'POST',
        '/api/v1/records',
        { entity: 'lead', fields: { email: 'tab@b.co' } },
        { 'idempotency-key': 'a\tb' },
      );
      expect(refused.statusCode).toBe(400);
      expect(refused.json().error).toBe('invalid_idempotency_key');
      const note = await call(
        'POST',
        '/api/v1/notes',
        { body: 'x', record: recordId },
        { 'idempotency-key': 'a\tb' },
      );
      expect(note.statusCode).toBe(400);
      expect(note.json().error).toBe('invalid_idempotency_key');
    });

    it('one rule for keys everywhere: a note’s key with a line break is 400 like a record’s', async () => {
      const note = await call('POST', '/api/v1/notes', {
        body: 'x',
        record: recordId,
        idempotency_key: 'a\nb',
      });
      expect(note.statusCode).toBe(400);
      expect(note.json().error).toBe('invalid_idempotency_key');
      const record = await call('POST', '/api/v1/records', {
        entity: 'lead',
        fields: { email: 'nl@b.co' },
        meta: { idempotency_key: 'a\nb' },
      });
      expect(record.statusCode).toBe(400);
      const bulk = await call('POST', '/api/v1/records/bulk', {
        records: [{ entity: 'lead', fields: { email: 'nl2@b.co' }, meta: { idempotency_key: 'a\nb' } }],
      });
      expect(bulk.statusCode).toBe(200);
      expect(bulk.json().results[0].error).toBe('invalid_idempotency_key');
    });

    it('the documented key pattern and the service’s key rule agree on any string', async () => {
      const documented = validBy(bodySchema('/api/v1/notes', 'post').properties.idempotency_key);
      fc.assert(
        fc.property(
          fc.oneof(fc.string({ maxLength: 300 }), fc.string({ unit: 'binary', maxLength: 20 })),
          (key) => {
            let serviceTakes = true;
            try {
              checkIdempotencyKey(key);
            } catch {
              serviceTakes = false;
            }
            expect(documented(key), JSON.stringify(key)).toBe(serviceTakes);
          },
        ),
        { numRuns: 500 },
      );
    });

    it('updated_since is a date-time', async () => {
      expect(parameter('/api/v1/records', 'get', 'updated_since').schema.format).toBe('date-time');
      const response = await t.request({
        method: 'GET',
        url: '/api/v1/records?updated_since=x',
        key: account.apiKey,
      });
      expect(response.statusCode).toBe(422);
      expect(response.json().details).toEqual([
        expect.objectContaining({ key: 'updated_since', reason: 'invalid_format' }),
      ]);
    });

    it('a cursor is the issued text only', async () => {
      expect(parameter('/api/v1/records', 'get', 'cursor').schema.pattern).toBe('^[A-Za-z0-9_-]*$');
      const response = await t.request({
        method: 'GET',
        url: '/api/v1/records?cursor=%21',
        key: account.apiKey,
      });
      expect(response.statusCode).toBe(422);
    });

    it('field definitions state formats per type, options on selects, roles on text', async () => {
      const valid = validBy(bodySchema('/api/v1/settings/entities/{key}', 'put'));
      const refusedByBoth = [
        { key: 'n', label: 'N', type: 'number', format: 'email' },
        { key: 's', label: 'S', type: 'select' },
        { key: 's', label: 'S', type: 'select', options: ['a', 'a'] },
        { key: 't', label: 'T', type: 'text', options: ['a'] },
        { key: 'b', label: 'B', type: 'boolean', role: 'email' },
      ];
      for (const field of refusedByBoth) {
        const body = { name: 'E', fields: [field] };
        expect(valid(body), JSON.stringify(field)).toBe(false);
        const response = await call('PUT', '/api/v1/settings/entities/stated', body);
        expect(response.statusCode, JSON.stringify(field)).toBe(422);
      }
      const stages = { name: 'E', fields: [], pipelines: [{ name: 'P', stages: ['a', 'a'] }] };
      expect(valid(stages)).toBe(false);
      expect((await call('PUT', '/api/v1/settings/entities/stated', stages)).statusCode).toBe(422);
      const fine = { name: 'E', fields: [{ key: 'n', label: 'N', type: 'number', format: 'integer' }] };
      expect(valid(fine)).toBe(true);
      expect((await call('PUT', '/api/v1/settings/entities/stated', fine)).statusCode).toBe(200);
    });

    it('S1 notes are bounded instead of cut short', async () => {
      const schema = bodySchema('/api/intake', 'post');
      expect(schema.properties.note.maxLength).toBe(10_000);
      expect(schema.properties.notes.maxItems).toBe(50);
      const long = await call('POST', '/api/intake', {
        entity: 'lead',
        email: 'long@b.co',
        note: 'x'.repeat(10_001),
      });
      expect(long.statusCode).toBe(422);
    });

    it('record tokens name field keys', async () => {
      const schema = bodySchema('/api/v1/records/{id}/tokens', 'post');
      expect(schema.properties.fields.items.pattern).toBeDefined();
      const response = await call('POST', `/api/v1/records/${recordId}/tokens`, { fields: ['Not A Key'] });
      expect(response.statusCode).toBe(422);
    });
  });

  describe('security', () => {
    it('declares how each operation authenticates', () => {
      expect(doc.paths['/api/v1/records']!.patch.security).toEqual([{ recordToken: [] }]);
      // Wherever an API key is taken, a person's session cookie is too (decisions §14).
      expect(doc.paths['/api/v1/records']!.post.security).toEqual([{ apiKey: [] }, { sessionCookie: [] }]);
      expect(doc.paths['/admin/v1/accounts']!.post.security).toEqual([{ adminToken: [] }]);
      expect(doc.paths['/api/v1/documents/{id}']!.get.security).toEqual([
        { signedAddress: [] },
        { apiKey: [] },
        { sessionCookie: [] },
      ]);
      expect(doc.paths['/api/v1/session']!.get.security).toEqual([{ sessionCookie: [] }]);
      expect(doc.paths['/api/v1/session']!.post.security).toEqual([]);
      expect(doc.paths['/api/v1/session/password']!.post.security).toEqual([{}, { sessionCookie: [] }]);
      expect(doc.paths['/api/v1/in/{token}']!.post.security).toEqual([]);
    });

    it('states the rate-limit headers and the 429 answer on metered operations', () => {
      const responses = doc.paths['/api/v1/records']!.post.responses;
      expect(Object.keys(responses['201'].headers)).toEqual(
        expect.arrayContaining(['X-Request-Id', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']),
      );
      expect(responses['429'].headers['Retry-After']).toBeDefined();
      expect(doc.paths['/admin/v1/accounts']!.post.responses['429']).toBeUndefined();
    });
  });
});

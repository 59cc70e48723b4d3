import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { LEAD_ENTITY, putEntity } from '../helpers/fixtures.ts';

const INVALID = 'contains a NUL character or an unpaired UTF-16 surrogate';
/** The S2 answer naming one path whose text the database cannot store. */
const refused = (key: string) => ({
  error: 'validation_failed',
  details: [{ key, reason: 'invalid_characters', message: INVALID }],
});
const s1Refused = (key: string) => ({
  status: 'error',
  message: 'The request has invalid values',
  errors: { [key]: [INVALID] },
});
/** Tables an intake or a settings call writes to, counted per account. */
const TABLES = [
  'records',
  'record_events',
  'notes',
  'documents',
  'idempotency_keys',
  'intake_log',
  'sources',
  'api_keys',
  'users',
  'entities',
];

const ENTITY = {
  ...LEAD_ENTITY,
  fields: [...LEAD_ENTITY.fields, { key: 'attachments', label: 'Attachments', type: 'files' }],
};

describe.each(TEST_DATABASES)('text the database cannot store, on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  let recordId: string;
  let server: http.Server;
  let base: string;

  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await t.createAccount({ modules: ['crm'] });
    await putEntity(t, account, 'lead', ENTITY);
    const created = await intake({ entity: 'lead', fields: { email: 'kept@b.co', first_name: 'Kept' } });
    recordId = created.json().id;
    server = http.createServer((req, res) => {
      const headers: Record<string, string> = {
        '/nul-name': "attachment; filename*=UTF-8''a%00b%F0%9F%98%80.txt",
        '/surrogate-name': `attachment; filename*=UTF-8''%ED%A0%80x.txt; filename="plain.txt"`,
        '/long-name': `attachment; filename*=UTF-8''${'x'.repeat(199)}%F0%9F%98%80%F0%9F%98%80`,
      };
      const disposition = headers[req.url ?? ''];
      res.writeHead(200, disposition ? { 'content-disposition': disposition } : {}).end('words\n');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await t?.close();
  });

  function intake(body: unknown, headers: Record<string, string> = {}) {
    return t.request({ method: 'POST', url: '/api/v1/records', key: account.apiKey, body, headers });
  }
  function raw(
    method: 'POST' | 'PATCH' | 'PUT',
    url: string,
    payload: string | Buffer,
    type = 'application/json',
  ) {
    return t.request({ method, url, key: account.apiKey, headers: { 'content-type': type }, payload });
  }
  async function counts(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const table of TABLES) {
      const { rows } = await sql<{
        n: number;
      }>`SELECT count(*)::int AS n FROM ${sql.table(table)} WHERE account_id = ${account.id}`.execute(t.db);
      out[table] = rows[0]!.n;
    }
    return out;
  }
  /** Runs the request and checks that it wrote nothing at all. */
  async function writesNothing<T>(send: () => Promise<T>): Promise<T> {
    const before = await counts();
    const response = await send();
    expect(await counts()).toEqual(before);
    return response;
  }
  /**
   * Runs an intake call the edge refuses and checks that it wrote its refused log entry and
   * nothing else (decisions §10: every intake call is logged).
   */
  async function logsOneRefusal<T>(send: () => Promise<T>): Promise<T> {
    const before = await counts();
    const response = await send();
    expect(await counts()).toEqual({ ...before, intake_log: (before.intake_log ?? 0) + 1 });
    const { rows } = await sql<{ outcome: string }>`
      SELECT outcome FROM intake_log WHERE account_id = ${account.id} ORDER BY created_at DESC, id DESC LIMIT 1`.execute(
      t.db,
    );
    expect(rows[0]?.outcome).toBe('refused');
    return response;
  }
  async function readRecord(id: string) {
    const response = await t.request({ method: 'GET', url: `/api/v1/records/${id}`, key: account.apiKey });
    expect(response.statusCode).toBe(200);
    return response.json();
  }

  describe('happy path', () => {
    it('takes every other character: astral, U+FFFD, control characters but NUL, noncharacters', async () => {
      const text = 'Zoë 😀 \uFFFD \u0001\u001f \uFDD0 \uD83D\uDE00 \u{10FFFF}';
      const created = await intake({ entity: 'lead', fields: { email: 'full@b.co', first_name: text } });
      expect(created.statusCode).toBe(201);
      expect((await readRecord(created.json().id)).fields.first_name).toBe(text);
    });

    it('reads raw invalid UTF-8 bytes in a body as U+FFFD', async () => {
      const payload = Buffer.concat([
        Buffer.from('{"entity":"lead","fields":{"email":"bytes@b.co","first_name":"a'),
        Buffer.from([0xff, 0xed, 0xa0, 0x80, 0xc0, 0x80]),
        Buffer.from('b"}}'),
      ]);
      const created = await raw('POST', '/api/v1/records', payload);
      expect(created.statusCode).toBe(201);
      const stored = (await readRecord(created.json().id)).fields.first_name as string;
      expect(stored.startsWith('a\uFFFD')).toBe(true);
      expect(stored.isWellFormed()).toBe(true);
    });

    it('never cuts a surrogate pair in two when it shortens a name or a note', async () => {
      const first = `${'a'.repeat(299)}😀`;
      const created = await intake({
        entity: 'lead',
        fields: { email: 'cut@b.co', first_name: first },
        note: `${'n'.repeat(499)}😀`,
      });
      expect(created.statusCode).toBe(201);
      const record = await readRecord(created.json().id);
      expect(record.name).toBe('a'.repeat(299));
      expect(record.fields.first_name).toBe(first);
    });

    it('takes -0 and numbers near the limits of a double', async () => {
      const created = await raw(
        'POST',
        '/api/v1/records',
        '{"entity":"lead","fields":{"email":"num@b.co","budget":-0,"rooms":0},"meta":{"x":1.7976931348623157e308,"y":5e-324}}',
      );
      expect(created.statusCode).toBe(201);
      expect((await readRecord(created.json().id)).fields.budget).toBe(0);
    });
  });

  describe('errors', () => {
    it('refuses NUL and lone surrogates in S2 field values, field keys, note and meta', async () => {
      const cases: [object, string][] = [
        [{ fields: { email: 'x@b.co', first_name: 'a\u0000b' } }, 'fields.first_name'],
        [{ fields: { email: 'x@b.co', first_name: '\ud800' } }, 'fields.first_name'],
        [{ fields: { email: 'x@b.co', first_name: 'a\udc00' } }, 'fields.first_name'],
        [{ fields: { email: 'x@b.co', topics: ['Price', 'x\u0000'] } }, 'fields.topics.1'],
        [{ fields: { email: 'x@b.co', 'a\u0000b': 'x' } }, 'fields.a\\u0000b'],
        [{ fields: { email: 'x@b.co', '\ud800': 'x' } }, 'fields.\\ud800'],
        [{ fields: { email: 'x@b.co' }, note: 'a\u0000' }, 'note'],
        [{ fields: { email: 'x@b.co' }, meta: { utm_source: '\ud800' } }, 'meta.utm_source'],
        [{ fields: { email: 'x@b.co' }, meta: { external_id: 'a\u0000' } }, 'meta.external_id'],
        [{ fields: { email: 'x@b.co' }, meta: { source: 'a\u0000' } }, 'meta.source'],
        [{ fields: { email: 'x@b.co' }, meta: { idempotency_key: 'a\u0000' } }, 'meta.idempotency_key'],
        [{ email: 'x@b.co', first_name: 'a\u0000' }, 'first_name'],
        [{ fields: { email: 'x@b.co' }, crm: { stage: 'New\u0000' } }, 'crm.stage'],
        [
          { fields: { email: 'x@b.co' }, documents: [{ url: `${base}/a`, name: 'a\u0000' }] },
          'documents.0.name',
        ],
      ];
      for (const [body, key] of cases) {
        const response = await logsOneRefusal(() => intake({ entity: 'lead', ...body }));
        expect({ key, status: response.statusCode, body: response.json() }).toEqual({
          key,
          status: 422,
          body: refused(key),
        });
      }
      const entity = await logsOneRefusal(() =>
        intake({ entity: 'lead\u0000', fields: { email: 'x@b.co' } }),
      );
      expect(entity.json()).toEqual(refused('entity'));
    });

    it('refuses the JSON escapes \\u0000 and \\ud800 written in the body text, in keys and values', async () => {
      const bodies: [string, string][] = [
        ['{"entity":"lead","fields":{"email":"x@b.co","first_name":"\\ud800"}}', 'fields.first_name'],
        ['{"entity":"lead","fields":{"email":"x@b.co","first_name":"a\\u0000"}}', 'fields.first_name'],
        ['{"entity":"lead","fields":{"email":"x@b.co","a\\u0000":"x"}}', 'fields.a\\u0000'],
        ['{"entity":"lead","fields":{"email":"x@b.co"},"meta":{"\\udfff":1}}', 'meta.\\udfff'],
        ['"\\u0000"', 'body'],
      ];
      for (const [payload, key] of bodies) {
        const response = await logsOneRefusal(() => raw('POST', '/api/v1/records', payload));
        expect({ key, status: response.statusCode, body: response.json() }).toEqual({
          key,
          status: 422,
          body: refused(key),
        });
      }
    });

    it('refuses numbers JSON cannot hold (1e309 is Infinity) with out_of_range', async () => {
      for (const payload of [
        '{"entity":"lead","fields":{"email":"x@b.co","budget":1e309}}',
        '{"entity":"lead","fields":{"email":"x@b.co"},"meta":{"n":-1e400}}',
      ]) {
        const response = await logsOneRefusal(() => raw('POST', '/api/v1/records', payload));
        expect(response.statusCode).toBe(422);
        expect(response.json().details[0].reason).toBe('out_of_range');
      }
    });

    it('refuses such text on PATCH of a record, with the API key and with a record token', async () => {
      const patch = await writesNothing(() =>
        t.request({
          method: 'PATCH',
          url: `/api/v1/records/${recordId}`,
          key: account.apiKey,
          body: { fields: { first_name: 'a\u0000b' } },
        }),
      );
      expect(patch.statusCode).toBe(422);
      expect(patch.json()).toEqual(refused('fields.first_name'));
      const issued = await t.request({
        method: 'POST',
        url: `/api/v1/records/${recordId}/tokens`,
        key: account.apiKey,
        body: { fields: ['first_name'] },
      });
      expect(issued.statusCode).toBe(201);
      const tokenPatch = await writesNothing(() =>
        t.request({
          method: 'PATCH',
          url: '/api/v1/records',
          key: issued.json().token,
          body: { fields: { first_name: '\ud800' } },
        }),
      );
      expect(tokenPatch.statusCode).toBe(422);
      expect(tokenPatch.json()).toEqual(refused('fields.first_name'));
      const s1 = await writesNothing(() =>
        t.request({
          method: 'PATCH',
          url: `/api/leads/${recordId}`,
          key: account.apiKey,
          body: { fields: { first_name: 'x' }, note: 'a\u0000' },
        }),
      );
      expect(s1.statusCode).toBe(422);
      expect(s1.json()).toEqual(s1Refused('note'));
      expect((await readRecord(recordId)).fields.first_name).toBe('Kept');
    });

    it('refuses such text in S1 JSON and form-encoded intake, bracketed form keys included', async () => {
      const json = await logsOneRefusal(() =>
        t.request({
          method: 'POST',
          url: '/api/intake',
          key: account.apiKey,
          body: { entity: 'lead', email: 'x@b.co', first_name: 'a\u0000b' },
        }),
      );
      expect(json.statusCode).toBe(422);
      expect(json.json()).toEqual(s1Refused('first_name'));
      const form = 'application/x-www-form-urlencoded';
      const forms: [string, string][] = [
        ['entity=lead&email=x%40b.co&first_name=a%00b', 'first_name'],
        ['entity=lead&email=x%40b.co&first%00name=x', 'first\\u0000name'],
        ['entity=lead&email=x%40b.co&fields[first_name]=a%00b', 'fields[first_name]'],
        ['entity=lead&email=x%40b.co&note=a&note=b%00', 'note.1'],
      ];
      for (const [payload, key] of forms) {
        const response = await logsOneRefusal(() => raw('POST', '/api/intake', payload, form));
        expect({ key, status: response.statusCode, body: response.json() }).toEqual({
          key,
          status: 422,
          body: s1Refused(key),
        });
      }
      // Percent escapes that are not UTF-8 stay as they were written: storable text.
      const undecodable = await raw(
        'POST',
        '/api/intake',
        'entity=lead&email=u%40b.co&first_name=a%ED%A0%80',
        form,
      );
      expect(undecodable.statusCode).toBe(200);
    });

    it('refuses such text in a form sent to a source token', async () => {
      const source = await t.request({
        method: 'POST',
        url: '/api/v1/settings/sources',
        key: account.apiKey,
        body: { name: 'Website' },
      });
      const url = `/api/v1/in/${source.json().token}`;
      const response = await logsOneRefusal(() =>
        t.request({
          method: 'POST',
          url,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: 'entity=lead&email=x%40b.co&first_name=a%00b',
        }),
      );
      expect(response.statusCode).toBe(422);
      expect(response.json()).toEqual(refused('first_name'));
      const token = await writesNothing(() =>
        t.request({ method: 'POST', url: '/api/v1/in/st_%00', body: {} }),
      );
      expect(token.statusCode).toBe(401);
    });

    it('refuses such text in the settings API and the operator API', async () => {
      const calls: [string, string, object, string][] = [
        ['POST', '/api/v1/settings/sources', { name: 'a\u0000' }, 'name'],
        ['POST', '/api/v1/settings/api-keys', { name: '\ud800' }, 'name'],
        ['POST', '/api/v1/settings/users', { email: 'u@b.co', name: 'a\u0000' }, 'name'],
        ['PUT', '/api/v1/settings/entities/other', { name: 'a\u0000', fields: [] }, 'name'],
        [
          'PUT',
          '/api/v1/settings/entities/other',
          { name: 'Other', fields: [{ key: 'x', label: 'X\ud800', type: 'text' }] },
          'fields.0.label',
        ],
        [
          'PUT',
          '/api/v1/settings/entities/other',
          { name: 'Other', fields: [{ key: 'x', label: 'X', type: 'select', options: ['a\u0000'] }] },
          'fields.0.options.0',
        ],
      ];
      for (const [method, url, body, key] of calls) {
        const response = await writesNothing(() =>
          t.request({ method: method as 'POST', url, key: account.apiKey, body }),
        );
        expect({ url, key, status: response.statusCode, body: response.json() }).toEqual({
          url,
          key,
          status: 422,
          body: refused(key),
        });
      }
      // An entity key in the path holding such text names no entity, as a malformed id names nothing.
      const path = await writesNothing(() =>
        t.request({
          method: 'PUT',
          url: '/api/v1/settings/entities/a%00',
          key: account.apiKey,
          body: { name: 'A', fields: [] },
        }),
      );
      expect({ status: path.statusCode, body: path.json() }).toEqual({
        status: 404,
        body: { error: 'not_found' },
      });

      const accountsBefore = await t.db.selectFrom('accounts').select('id').execute();
      const created = await t.request({
        method: 'POST',
        url: '/admin/v1/accounts',
        key: ADMIN_TOKEN,
        body: { name: 'a\u0000' },
      });
      expect(created.statusCode).toBe(422);
      expect(created.json()).toEqual(refused('name'));
      const patched = await t.request({
        method: 'PATCH',
        url: `/admin/v1/accounts/${account.id}`,
        key: ADMIN_TOKEN,
        body: { name: '\udfff' },
      });
      expect(patched.statusCode).toBe(422);
      expect(patched.json()).toEqual(refused('name'));
      expect(await t.db.selectFrom('accounts').select('id').execute()).toEqual(accountsBefore);
    });

    it('refuses such text in query strings, keys and values, with 422', async () => {
      const urls: [string, string][] = [
        ['/api/v1/records?q=%00', 'q'],
        ['/api/v1/records?entity=%00', 'entity'],
        ['/api/v1/records?cursor=a%00', 'cursor'],
        ['/api/v1/records?updated_since=2024%00', 'updated_since'],
        ['/api/v1/records?%00=1', '\\u0000'],
        ['/api/v1/intake-log?cursor=%00', 'cursor'],
        ['/api/v1/settings/sources?cursor=%00', 'cursor'],
      ];
      for (const [url, key] of urls) {
        const response = await t.request({ method: 'GET', url, key: account.apiKey });
        expect({ url, status: response.statusCode, body: response.json() }).toEqual({
          url,
          status: 422,
          body: refused(key),
        });
      }
    });

    it('answers 422 for cursors and times the database cannot read', async () => {
      const cursor = (at: string) =>
        Buffer.from(JSON.stringify([at, '00000000-0000-0000-0000-000000000000'])).toString('base64url');
      for (const url of [
        `/api/v1/records?cursor=${cursor('2024-01-01 (\u0000)')}`,
        `/api/v1/records?cursor=${cursor('-271821-04-20T00:00:00.000Z')}`,
        `/api/v1/intake-log?cursor=${cursor('Tue 2024 (x)')}`,
        '/api/v1/records?updated_since=-271821-04-20T00:00:00Z',
        '/api/v1/records?updated_since=%2B275760-09-13T00:00:00Z',
      ]) {
        const response = await t.request({ method: 'GET', url, key: account.apiKey });
        expect({ url, status: response.statusCode }).toEqual({ url, status: 422 });
        expect(response.json().details[0].reason).toBe('invalid_format');
      }
    });

    it('answers 404 for path ids holding such text or not percent-encoded UTF-8', async () => {
      const s2 = ['/api/v1/records/%00', '/api/v1/records/%ED%A0%80', '/api/v1/documents/%00'];
      for (const url of s2) {
        const response = await t.request({ method: 'GET', url, key: account.apiKey });
        expect({ url, status: response.statusCode, body: response.json() }).toEqual({
          url,
          status: 404,
          body: { error: 'not_found' },
        });
        expect(response.headers['x-request-id']).toBeTruthy();
      }
      for (const url of ['/api/leads/%ED%A0%80', '/api/leads/%00']) {
        const response = await t.request({ method: 'GET', url, key: account.apiKey });
        expect({ url, status: response.statusCode, body: response.json() }).toEqual({
          url,
          status: 404,
          body: { status: 'error', message: 'Not found' },
        });
      }
      const patch = await writesNothing(() =>
        t.request({
          method: 'PATCH',
          url: '/api/v1/records/%00',
          key: account.apiKey,
          body: { fields: { first_name: 'x' } },
        }),
      );
      expect(patch.statusCode).toBe(404);
      const long = await t.request({
        method: 'GET',
        url: `/api/v1/records/${'a'.repeat(300)}`,
        key: account.apiKey,
      });
      expect(long.statusCode).toBe(404);
      expect(long.json()).toEqual({ error: 'not_found' });
      const nowhere = await t.request({ method: 'GET', url: '/api/v1/nowhere/%00', key: account.apiKey });
      expect(nowhere.json()).toEqual({ error: 'unknown_endpoint' });
    });

    it('refuses such text in notes', async () => {
      const response = await writesNothing(() =>
        t.request({
          method: 'POST',
          url: '/api/v1/notes',
          key: account.apiKey,
          body: { record: recordId, body: 'a\u0000b' },
        }),
      );
      expect(response.statusCode).toBe(422);
      expect(response.json()).toEqual(refused('body'));
    });
  });

  describe('bulk calls', () => {
    async function intakeLog() {
      const response = await t.request({
        method: 'GET',
        url: '/api/v1/intake-log?limit=500',
        key: account.apiKey,
      });
      return response.json().entries as {
        endpoint: string;
        outcome: string;
        error: string | null;
        warnings: unknown[];
        items: unknown[] | null;
      }[];
    }

    it('S2 bulk refuses only the affected entries, creates the clean ones and logs the refusals', async () => {
      const logBefore = (await intakeLog()).length;
      const response = await t.request({
        method: 'POST',
        url: '/api/v1/records/bulk',
        key: account.apiKey,
        body: {
          records: [
            { entity: 'lead', fields: { email: 'clean1@b.co' } },
            { entity: 'lead', fields: { email: 'bad@b.co', first_name: 'a\u0000b' } },
            { entity: 'lead', fields: { email: 'clean2@b.co' }, meta: { idempotency_key: 'bulk-clean-2' } },
            { entity: 'lead\ud800', fields: { email: 'bad2@b.co' } },
            { entity: 'lead', fields: { email: 'bad3@b.co', 'k\u0000': 1 }, meta: { utm_source: '\udc00' } },
          ],
        },
      });
      expect(response.statusCode).toBe(200);
      const body = response.json();
      expect(body.accepted).toBe(2);
      expect(body.rejected).toBe(3);
      expect(body.results[0]).toMatchObject({ created: true });
      expect(body.results[2]).toMatchObject({ created: true });
      expect(body.results[1]).toEqual(refused('fields.first_name'));
      expect(body.results[3]).toEqual(refused('entity'));
      expect(body.results[4]).toEqual({
        error: 'validation_failed',
        details: [
          { key: 'fields.k\\u0000', reason: 'invalid_characters', message: INVALID },
          { key: 'meta.utm_source', reason: 'invalid_characters', message: INVALID },
        ],
      });
      // One entry for the call, listing each entry's outcome (decisions §10).
      const log = await intakeLog();
      expect(log.length - logBefore).toBe(1);
      expect(log[0]).toMatchObject({ endpoint: 'records.bulk', outcome: 'bulk', status_code: 200 });
      expect(log[0]!.items).toEqual([
        { index: 0, status: 'created', record_id: body.results[0].id },
        { index: 1, status: 'refused', error: 'validation_failed', details: body.results[1].details },
        { index: 2, status: 'created', record_id: body.results[2].id },
        { index: 3, status: 'refused', error: 'validation_failed', details: body.results[3].details },
        { index: 4, status: 'refused', error: 'validation_failed', details: body.results[4].details },
      ]);
    });

    it('S2 bulk with an Idempotency-Key replays the same answer, refused entries included', async () => {
      const send = () =>
        t.request({
          method: 'POST',
          url: '/api/v1/records/bulk',
          key: account.apiKey,
          headers: { 'idempotency-key': 'bulk-with-bad-entry' },
          body: {
            records: [
              { entity: 'lead', fields: { email: 'replay@b.co' } },
              { entity: 'lead', fields: { email: 'replay-bad@b.co', first_name: '\ud800' } },
            ],
          },
        });
      const first = await send();
      expect(first.statusCode).toBe(200);
      // The replay writes nothing but its own log entry (decisions §10: every call is logged).
      const before = await counts();
      const again = await send();
      expect(await counts()).toEqual({ ...before, intake_log: (before.intake_log ?? 0) + 1 });
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.json()).toEqual(first.json());
      const { rows } = await sql<{ outcome: string; status_code: number }>`
        SELECT outcome, status_code FROM intake_log WHERE account_id = ${account.id}
        ORDER BY created_at DESC, id DESC LIMIT 1`.execute(t.db);
      expect(rows[0]).toEqual({ outcome: 'replayed', status_code: 200 });
    });

    it('S2 bulk still refuses the whole call for such text outside its entries', async () => {
      const response = await logsOneRefusal(() =>
        t.request({
          method: 'POST',
          url: '/api/v1/records/bulk',
          key: account.apiKey,
          body: { records: [{ entity: 'lead', fields: { email: 'top@b.co' } }], 'x\u0000': 1 },
        }),
      );
      expect(response.statusCode).toBe(422);
      expect(response.json()).toEqual(refused('x\\u0000'));
    });

    it('S1 bulk stays all or nothing: 422 naming batch.<index>.<key>, logged, nothing created', async () => {
      const logBefore = (await intakeLog()).length;
      const before = await counts();
      const response = await t.request({
        method: 'POST',
        url: '/api/leads/bulk',
        key: account.apiKey,
        body: {
          entity: 'lead',
          batch: [{ email: 's1clean@b.co' }, { email: 's1bad@b.co', first_name: '\ud800' }],
        },
      });
      expect(response.statusCode).toBe(422);
      expect(response.json()).toEqual(s1Refused('batch.1.first_name'));
      // Only the refusal's log entry is written.
      expect(await counts()).toEqual({ ...before, intake_log: (before.intake_log ?? 0) + 1 });
      const log = await intakeLog();
      expect(log.length).toBe(logBefore + 1);
      expect(log[0]).toMatchObject({ endpoint: 's1.bulk', outcome: 'refused', error: 'validation_failed' });
      const source = await logsOneRefusal(() =>
        t.request({
          method: 'POST',
          url: '/api/leads/bulk',
          key: account.apiKey,
          body: { entity: 'lead', source: 'a\u0000', batch: [{ email: 's1@b.co' }] },
        }),
      );
      expect(source.json()).toEqual(s1Refused('source'));
    });
  });

  describe('security', () => {
    it('stores document names from remote headers and addresses without NUL or unpaired surrogates', async () => {
      const created = await intake({
        entity: 'lead',
        fields: { email: 'docs@b.co' },
        documents: [
          { url: `${base}/nul-name` },
          { url: `${base}/surrogate-name` },
          { url: `${base}/long-name` },
          { url: `${base}/dir/a%00b%ED%A0%80` },
        ],
      });
      expect(created.statusCode).toBe(201);
      expect(created.json().warnings).toEqual([]);
      const names = ((await readRecord(created.json().id)).documents as { name: string }[])
        .map((document) => document.name)
        .sort();
      expect(names).toEqual(['a%00b%ED%A0%80', 'ab😀.txt', 'plain.txt', `${'x'.repeat(199)}😀`].sort());
      for (const name of names) expect(name.isWellFormed() && !name.includes('\u0000')).toBe(true);
    });

    it('keeps such text out of headers that reach the database', async () => {
      const idempotency = await logsOneRefusal(() =>
        intake({ entity: 'lead', fields: { email: 'hdr@b.co' } }, { 'idempotency-key': 'key-\u00ff' }),
      );
      expect(idempotency.statusCode).toBe(400);
      expect(idempotency.json()).toEqual({ error: 'invalid_idempotency_key' });
      const requestId = await intake(
        { entity: 'lead', fields: { email: 'reqid@b.co' } },
        { 'x-request-id': 'id-\u00e9-\u00ff' },
      );
      expect(requestId.statusCode).toBe(201);
      expect(requestId.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    });

    it('answers the refusal of such text before anything else only for a valid credential', async () => {
      const response = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: 'lk_not_a_key',
        body: { entity: 'lead', fields: { first_name: 'a\u0000' } },
      });
      expect(response.statusCode).toBe(401);
    });
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { BROWSER_ACCEPT, createSource, FORM, multipart, readRecord, recordsOf } from './support.ts';

/**
 * What a browser's plain form post gets (decisions §13): a 303 to the source's addresses, or a
 * small page in English or German, for success and for every refusal, also those made before
 * the handler; never JSON, never a stack trace.
 */
describe.each(TEST_DATABASES)('website forms: answers for browsers on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t);
  });
  afterAll(async () => t?.close());

  const browserPost = (
    url: string,
    payload: string | Buffer,
    headers: Record<string, string> = {},
    contentType = FORM,
  ) =>
    t.request({
      method: 'POST',
      url,
      headers: { accept: BROWSER_ACCEPT, 'content-type': contentType, ...headers },
      payload,
    });
  const valid = (email: string) =>
    `entity=lead&fields%5Bemail%5D=${encodeURIComponent(email)}&first_name=Ann`;

  const expectPage = (answer: Awaited<ReturnType<typeof browserPost>>, language: 'en' | 'de') => {
    expect(answer.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(answer.headers['content-language']).toBe(language);
    expect(answer.headers['content-security-policy']).toContain("default-src 'none'");
    expect(answer.body).toContain(`<html lang="${language}">`);
    expect(answer.body).not.toMatch(/"error"\s*:|\bat \S+\.ts:\d+/);
  };

  describe('happy path', () => {
    it('sends the browser to success_url with ?id= and stores the record', async () => {
      const source = await createSource(t, account, {
        success_url: 'https://www.example.com/danke?ref=form',
      });
      const answer = await browserPost(source.url, valid('redirect@b.co'));
      expect(answer.statusCode).toBe(303);
      const location = new URL(String(answer.headers.location));
      expect(`${location.origin}${location.pathname}`).toBe('https://www.example.com/danke');
      expect(location.searchParams.get('ref')).toBe('form');
      const id = location.searchParams.get('id')!;
      expect((await readRecord(t, account, id)).fields.email).toBe('redirect@b.co');
      expect(answer.body).toBe('');
    });

    it('shows a page in English or German without success_url', async () => {
      const source = await createSource(t, account);
      const english = await browserPost(source.url, valid('page-en@b.co'));
      expect(english.statusCode).toBe(201);
      expectPage(english, 'en');
      expect(english.body).toContain('Your form was received.');
      const german = await browserPost(source.url, valid('page-de@b.co'), {
        'accept-language': 'de-DE,de;q=0.9,en;q=0.8',
      });
      expect(german.statusCode).toBe(201);
      expectPage(german, 'de');
      expect(german.body).toContain('Ihr Formular ist eingegangen.');
      const other = await browserPost(source.url, valid('page-fr@b.co'), { 'accept-language': 'fr-FR,fr' });
      expectPage(other, 'en');
      const emails = (await recordsOf(t, account)).map((row) => (row.fields as { email?: string }).email);
      expect(emails).toEqual(expect.arrayContaining(['page-en@b.co', 'page-de@b.co', 'page-fr@b.co']));
    });

    it('links back to the form page named by an http(s) Referer, escaped', async () => {
      const source = await createSource(t, account);
      const answer = await browserPost(source.url, valid('back@b.co'), {
        referer: 'https://www.example.com/kontakt?a=1&b="x"',
      });
      expect(answer.body).toContain('href="https://www.example.com/kontakt?a=1&amp;b=&quot;x&quot;"');
      const script = await browserPost(source.url, valid('back2@b.co'), { referer: 'javascript:alert(1)' });
      expect(script.body).not.toContain('javascript:');
    });

    it('answers JSON as before when Accept does not prefer HTML', async () => {
      const source = await createSource(t, account, {
        success_url: 'https://www.example.com/ok',
        error_url: 'https://www.example.com/err',
      });
      for (const accept of ['*/*', 'application/json', 'application/json, text/html;q=0.5']) {
        const ok = await t.request({
          method: 'POST',
          url: source.url,
          headers: { accept, 'content-type': FORM },
          payload: valid(`json-${accept.length}@b.co`),
        });
        expect({ accept, status: ok.statusCode }).toEqual({ accept, status: 201 });
        expect(ok.json().created).toBe(true);
        const refused = await t.request({
          method: 'POST',
          url: source.url,
          headers: { accept, 'content-type': FORM },
          payload: 'entity=lead',
        });
        expect(refused.statusCode).toBe(422);
        expect(refused.json().error).toBe('validation_failed');
      }
    });
  });

  describe('errors', () => {
    it('sends the browser to error_url with ?error=<code> and stores nothing', async () => {
      const source = await createSource(t, account, { error_url: 'https://www.example.com/oops' });
      const before = (await recordsOf(t, account)).length;
      const answer = await browserPost(source.url, 'entity=lead&first_name=NoEmail');
      expect(answer.statusCode).toBe(303);
      expect(answer.headers.location).toBe('https://www.example.com/oops?error=validation_failed');
      expect((await recordsOf(t, account)).length).toBe(before);
    });

    it('names what was wrong on the page, in the browser’s language', async () => {
      const source = await createSource(t, account);
      const english = await browserPost(source.url, 'entity=lead&first_name=NoEmail');
      expect(english.statusCode).toBe(422);
      expectPage(english, 'en');
      expect(english.body).toContain('role="alert"');
      expect(english.body).toMatch(/<strong>email<\/strong> is required/);
      const german = await browserPost(source.url, 'entity=lead&first_name=NoEmail', {
        'accept-language': 'de',
      });
      expectPage(german, 'de');
      expect(german.body).toMatch(/<strong>email<\/strong> fehlt/);
      const escaped = await browserPost(source.url, 'entity=lead&%3Cscript%3E=1');
      expect(escaped.body).not.toContain('<script>');
    });

    it('answers refusals made before the handler with a page or error_url too', async () => {
      const source = await createSource(t, account, { error_url: 'https://www.example.com/oops' });
      const plain = await createSource(t, account);
      // An unknown token: no source is known, so no error_url either.
      const unknown = await browserPost('/api/v1/in/st_not_a_token', valid('x@b.co'));
      expect(unknown.statusCode).toBe(401);
      expectPage(unknown, 'en');
      expect(unknown.body).toContain('not connected to an active source');

      const big = multipart([
        { name: 'entity', value: 'lead' },
        { name: 'message', value: 'x'.repeat(1024 * 1024 + 10) },
      ]);
      const tooLarge = await browserPost(source.url, big.payload, {}, big.contentType);
      expect(tooLarge.statusCode).toBe(303);
      expect(tooLarge.headers.location).toBe('https://www.example.com/oops?error=payload_too_large');
      const tooLargeForm = await browserPost(
        plain.url,
        `entity=lead&message=${'x'.repeat(1024 * 1024 + 10)}`,
      );
      expect(tooLargeForm.statusCode).toBe(413);
      expectPage(tooLargeForm, 'en');
      expect(tooLargeForm.body).toContain('too large');

      const badMultipart = await browserPost(
        plain.url,
        'garbage',
        { 'accept-language': 'de' },
        'multipart/form-data',
      );
      expect(badMultipart.statusCode).toBe(400);
      expectPage(badMultipart, 'de');
      const badJson = await browserPost(plain.url, '{"entity":', {}, 'application/json');
      expect(badJson.statusCode).toBe(400);
      expectPage(badJson, 'en');
      const unsupported = await browserPost(plain.url, 'entity=lead', {}, 'text/plain');
      expect(unsupported.statusCode).toBe(415);
      expectPage(unsupported, 'en');
    });
  });

  describe('security', () => {
    it('never shows internals: the page of a refusal holds no JSON and no stack', async () => {
      const source = await createSource(t, account);
      const answer = await browserPost(source.url, 'entity=no_such_entity&email=x%40b.co');
      expect(answer.statusCode).toBe(404);
      expectPage(answer, 'en');
      expect(answer.body).toContain('not set up correctly');
    });

    it('a revoked token gets the refusal page, not the old source’s success_url', async () => {
      const source = await createSource(t, account, { success_url: 'https://www.example.com/ok' });
      await t.request({
        method: 'DELETE',
        url: `/api/v1/settings/sources/${source.id}/token`,
        key: account.apiKey,
      });
      const answer = await browserPost(source.url, valid('revoked@b.co'));
      expect(answer.statusCode).toBe(401);
      expectPage(answer, 'en');
    });
  });
});

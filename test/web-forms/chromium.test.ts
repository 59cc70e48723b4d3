import { existsSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formSnippet } from '../../console/src/areas/settings/form-snippet.ts';
import { escapeHtml } from '../../src/lib/text.ts';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { intakeLog, readRecord, recordsOf } from './support.ts';

/**
 * Website forms in a real browser (decisions §13): pages served by a web server on one origin
 * (127.0.0.1, port A; a refused one on port C) post to the service on another (127.0.0.1,
 * port B), as a website owner's form would. The visitor's screen and the stored record are both
 * checked.
 */

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) {
  console.warn(
    `website forms in Chromium: skipped, no browser at ${CHROMIUM} (install Debian's chromium, or set CHROMIUM_PATH)`,
  );
}

/** A web server for the site's pages: a path → HTML map, anything else a small echo page. */
async function startSite(pages: Map<string, string>) {
  const server = http.createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    const html =
      pages.get(url.pathname) ??
      `<!doctype html><meta charset="utf-8"><title>site</title><h1 id="landing">${escapeHtml(url.pathname)}</h1><p id="query">${escapeHtml(url.search)}</p>`;
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(html);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { origin, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** A plain form as a website owner copies it from the guide. */
function formPage(action: string, enctype = 'application/x-www-form-urlencoded', extra = ''): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Contact</title></head>
<body>
<form id="contact" method="post" action="${escapeHtml(action)}" enctype="${enctype}">
  <input type="hidden" name="entity" value="lead">
  <input type="hidden" name="meta[utm_source]" value="newsletter">
  <label>First name <input name="fields[first_name]" id="first_name"></label>
  <label>Email <input name="fields[email]" id="email"></label>
  <label>Message <textarea name="fields[message]" id="message"></textarea></label>
  ${extra}
  <div style="position:absolute;left:-10000px" aria-hidden="true">
    <label>Leave empty <input name="_hp" id="hp" tabindex="-1" autocomplete="off"></label>
  </div>
  <button type="submit" id="send">Send</button>
</form>
</body></html>`;
}

/** A page that posts with fetch() and shows what it got. */
function fetchPage(action: string, contentType: 'json' | 'form'): string {
  const request =
    contentType === 'json'
      ? `{ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ entity: 'lead', fields: { email: window.EMAIL, first_name: 'Fetch 🌍' }, meta: { utm_source: 'fetch' } }) }`
      : `{ method: 'POST', body: new URLSearchParams({ entity: 'lead', 'fields[email]': window.EMAIL }) }`;
  return `<!doctype html><html><head><meta charset="utf-8"><title>fetch</title></head><body>
<p id="result">waiting</p>
<script>
window.send = async (email) => {
  window.EMAIL = email;
  try {
    const response = await fetch(${JSON.stringify(action)}, ${request});
    const body = await response.json();
    document.getElementById('result').textContent = response.status + ' ' + JSON.stringify(body);
  } catch (error) {
    document.getElementById('result').textContent = 'failed ' + error.name;
  }
};
</script></body></html>`;
}

describe.skipIf(!hasChromium).each(TEST_DATABASES)('website forms in Chromium on %s', (kind) => {
  let t: TestApp;
  let account: TestAccount;
  let service: string;
  let browser: Browser;
  const pages = new Map<string, string>();
  let site: Awaited<ReturnType<typeof startSite>>;
  let refusedSite: Awaited<ReturnType<typeof startSite>>;

  beforeAll(async () => {
    t = await startTestApp(kind);
    account = await accountWithLeads(t);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    service = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    site = await startSite(pages);
    refusedSite = await startSite(pages);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  });
  afterAll(async () => {
    await browser?.close();
    await site?.close();
    await refusedSite?.close();
    await t?.close();
  });

  async function source(settings: Record<string, unknown> = {}) {
    const response = await t.request({
      method: 'POST',
      url: '/api/v1/settings/sources',
      key: account.apiKey,
      body: {
        name: `Site ${Math.random().toString(36).slice(2)}`,
        allowed_origins: [site.origin],
        ...settings,
      },
    });
    expect(response.statusCode).toBe(201);
    return `${service}/api/v1/in/${response.json().token}`;
  }

  async function open(path: string, html: string, locale = 'en-US', origin = site.origin): Promise<Page> {
    pages.set(path, html);
    const context = await browser.newContext({ locale });
    const page = await context.newPage();
    await page.goto(`${origin}${path}`);
    return page;
  }

  async function submit(page: Page) {
    await Promise.all([page.waitForNavigation(), page.click('#send')]);
  }

  it('a url-encoded form with UTF-8 text: the thank-you page, in the visitor’s language, and the record', async () => {
    const action = await source();
    const page = await open('/contact-en', formPage(action));
    await page.fill('#first_name', 'Jörg 🌞');
    await page.fill('#email', 'joerg@b.co');
    await page.fill('#message', 'Grüße aus Köln — ä ö ü ß 👍');
    await submit(page);
    expect(await page.textContent('h1')).toBe('Thank you!');
    expect(await page.textContent('main')).toContain('Your form was received.');
    const [stored] = await recordsOf(t, account);
    const record = await readRecord(t, account, stored!.id);
    expect(record.fields).toMatchObject({
      first_name: 'Jörg 🌞',
      email: 'joerg@b.co',
      message: 'Grüße aus Köln — ä ö ü ß 👍',
    });
    expect(record.origin).toEqual({ utm_source: 'newsletter' });

    const german = await open('/contact-de', formPage(action), 'de-DE');
    await german.fill('#email', 'deutsch@b.co');
    await submit(german);
    expect(await german.textContent('h1')).toBe('Vielen Dank!');
    expect(await german.getAttribute('html', 'lang')).toBe('de');
    await page.context().close();
    await german.context().close();
  });

  it('sends the visitor to success_url with the record id', async () => {
    const action = await source({ success_url: `${site.origin}/thanks` });
    const page = await open('/contact-redirect', formPage(action));
    await page.fill('#email', 'redirect@b.co');
    await submit(page);
    const landed = new URL(page.url());
    expect(`${landed.origin}${landed.pathname}`).toBe(`${site.origin}/thanks`);
    const record = await readRecord(t, account, landed.searchParams.get('id')!);
    expect(record.fields.email).toBe('redirect@b.co');
    expect(await page.textContent('#landing')).toBe('/thanks');
    await page.context().close();
  });

  it('a multipart form with a file: the record is stored, the file dropped with a warning', async () => {
    const action = await source();
    const page = await open(
      '/contact-file',
      formPage(action, 'multipart/form-data', '<label>CV <input type="file" name="cv" id="cv"></label>'),
    );
    await page.fill('#first_name', 'Zoë');
    await page.fill('#email', 'file@b.co');
    await page.setInputFiles('#cv', {
      name: 'lebenslauf.pdf',
      mimeType: 'application/pdf',
      buffer: Buffer.alloc(200_000, 37),
    });
    await submit(page);
    expect(await page.textContent('h1')).toBe('Thank you!');
    const [stored] = await recordsOf(t, account);
    const record = await readRecord(t, account, stored!.id);
    expect(record.fields).toMatchObject({ first_name: 'Zoë', email: 'file@b.co' });
    expect(record.documents).toEqual([]);
    const [entry] = await intakeLog(t, account);
    expect(entry!.warnings).toEqual([expect.objectContaining({ key: 'cv', reason: 'inline_file' })]);
    await page.context().close();
  });

  it('an empty required field lands on error_url, or on the refusal page naming it', async () => {
    const before = (await recordsOf(t, account)).length;
    const redirecting = await source({ error_url: `${site.origin}/form-error` });
    const page = await open('/contact-error', formPage(redirecting));
    await page.fill('#first_name', 'No email');
    await submit(page);
    const landed = new URL(page.url());
    expect(`${landed.origin}${landed.pathname}`).toBe(`${site.origin}/form-error`);
    expect(landed.searchParams.get('error')).toBe('validation_failed');

    const paged = await source();
    const german = await open('/contact-error-de', formPage(paged), 'de-DE');
    await german.fill('#first_name', 'Keine E-Mail');
    await submit(german);
    expect(await german.textContent('h1')).toBe('Das Formular wurde nicht gesendet');
    expect(await german.textContent('[role=alert]')).toContain('email fehlt');
    expect((await recordsOf(t, account)).length).toBe(before);
    await page.context().close();
    await german.context().close();
  });

  it('fetch() with CORS from an allowed origin reads the JSON answer; a refused origin is blocked', async () => {
    const action = await source();
    const allowed = await open('/fetch-json', fetchPage(action, 'json'));
    await allowed.evaluate(`window.send(${JSON.stringify('fetch@b.co')})`);
    const result = (await allowed.textContent('#result')) ?? '';
    expect(result).toMatch(/^201 /);
    const answer = JSON.parse(result.slice(4));
    expect(answer).toMatchObject({ entity: 'lead', created: true, warnings: [] });
    const record = await readRecord(t, account, answer.id);
    expect(record.fields).toMatchObject({ email: 'fetch@b.co', first_name: 'Fetch 🌍' });
    expect(record.origin).toEqual({ utm_source: 'fetch' });

    const before = (await recordsOf(t, account)).length;
    for (const kindOfBody of ['json', 'form'] as const) {
      const refused = await open(
        `/fetch-refused-${kindOfBody}`,
        fetchPage(action, kindOfBody),
        'en-US',
        refusedSite.origin,
      );
      await refused.evaluate(`window.send(${JSON.stringify(`refused-${kindOfBody}@b.co`)})`);
      expect(await refused.textContent('#result')).toBe('failed TypeError');
      await refused.context().close();
    }
    expect((await recordsOf(t, account)).length).toBe(before);
    await allowed.context().close();
  });

  it('a plain form on a refused origin gets the refusal page', async () => {
    const action = await source({ error_url: `${site.origin}/form-error` });
    const page = await open('/contact-refused', formPage(action), 'en-US', refusedSite.origin);
    await page.fill('#email', 'refused@b.co');
    await submit(page);
    expect(new URL(page.url()).origin).toBe(service);
    expect(await page.textContent('[role=alert]')).toContain('may not be sent from the page it is on');
    await page.context().close();
  });

  it("the console's form snippet, pasted as it is: every control it writes is stored as typed", async () => {
    const fields = [
      { key: 'email', label: 'Email', type: 'text', format: 'email', role: 'email', required: true },
      { key: 'visit_at', label: 'Visit', type: 'datetime', required: true },
      { key: 'day', label: 'Day', type: 'date' },
      { key: 'people', label: 'People', type: 'number' },
      { key: 'parking', label: 'Parking', type: 'boolean' },
      { key: 'topic', label: 'Topic', type: 'select', options: ['Sales', 'Support'] },
      { key: 'rooms', label: 'Rooms', type: 'multiselect', options: ['Kitchen', 'Roof'] },
      { key: 'message', label: 'Message', type: 'textarea' },
    ];
    const defined = await t.request({
      method: 'PUT',
      url: '/api/v1/settings/entities/visit',
      key: account.apiKey,
      body: { name: 'Visit', fields },
    });
    expect(defined.statusCode, defined.body).toBe(200);
    const action = await source();
    const html = formSnippet({
      action,
      entity: 'visit',
      fields: defined.json().fields,
      honeypot: '_hp',
      submitLabel: 'Send',
    });
    pages.set(
      '/snippet',
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Visit</title></head><body>${html}</body></html>`,
    );
    // A visitor in Berlin (UTC+1 in December): the wall-clock time typed is 10:30 there.
    const context = await browser.newContext({ locale: 'en-GB', timezoneId: 'Europe/Berlin' });
    const page = await context.newPage();
    await page.goto(`${site.origin}/snippet`);
    await page.getByLabel('Email').fill('visit@b.co');
    await page.getByLabel('Visit').fill('2026-12-01T10:30');
    await page.getByLabel('Day').fill('2026-12-02');
    await page.getByLabel('People').fill('3');
    await page.getByLabel('Parking').check();
    await page.getByLabel('Topic').selectOption('Support');
    await page.getByLabel('Roof').check();
    await page.getByLabel('Message').fill('Two floors');
    await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Send' }).click()]);
    expect(await page.textContent('h1')).toBe('Thank you!');
    const stored = (await intakeLog(t, account))[0];
    expect(stored?.outcome).toBe('created');
    const record = await readRecord(t, account, stored!.record_id!);
    expect(record.fields).toEqual({
      email: 'visit@b.co',
      visit_at: '2026-12-01T09:30:00.000Z',
      day: '2026-12-02',
      people: 3,
      parking: true,
      topic: 'Support',
      rooms: ['Roof'],
      message: 'Two floors',
    });
    await context.close();
  });

  it('the honeypot: a bot that fills it sees the thank-you page, and nothing is stored', async () => {
    const action = await source();
    const before = (await recordsOf(t, account)).length;
    const page = await open('/contact-bot', formPage(action));
    await page.fill('#email', 'bot@b.co');
    // A bot fills every input, the hidden trap too.
    await page.evaluate(`document.getElementById('hp').value = 'http://spam.example'`);
    await submit(page);
    expect(await page.textContent('h1')).toBe('Thank you!');
    expect(await page.textContent('main')).toContain('Your form was received.');
    expect((await recordsOf(t, account)).length).toBe(before);
    expect((await intakeLog(t, account))[0]?.outcome).toBe('spam');
    await page.context().close();
  });
});

import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { appointmentCount, createCalendar, recordWithLink, setModules, testClock } from './support.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const hasChromium = existsSync(CHROMIUM);
const ARTIFACTS = path.resolve('test-artifacts');
const ALL_DAY = [['00:00', '24:00']];
/** Open every day, all day, without notice: slots exist whenever the test runs. */
const ALWAYS_OPEN = {
  name: 'Solar advice',
  time_zone: 'Europe/Berlin',
  slot_minutes: 30,
  min_notice_minutes: 0,
  horizon_days: 30,
  weekly: Object.fromEntries(['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((day) => [day, ALL_DAY])),
};

if (!hasChromium)
  console.warn(`Booking page browser tests skipped: no Chromium at ${CHROMIUM} (set CHROMIUM_PATH)`);

describe.each(TEST_DATABASES)('the public booking page on %s', (kind) => {
  let t: TestApp;
  let base = 'http://127.0.0.1:0';
  let browser: Browser;
  beforeAll(async () => {
    t = await startTestApp(kind, { publicUrl: () => base });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    if (hasChromium) {
      browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
      await mkdir(ARTIFACTS, { recursive: true });
    }
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  async function linkAccount() {
    const account = await accountWithLeads(t, { modules: ['booking'] });
    await createCalendar(t, account, ALWAYS_OPEN);
    return account;
  }

  const page = (url: string, options: { method?: 'GET' | 'POST'; form?: string } = {}) =>
    t.app.inject({
      method: options.method ?? 'GET',
      url,
      headers: options.form !== undefined ? { 'content-type': 'application/x-www-form-urlencoded' } : {},
      payload: options.form,
    });
  /** The first time a rendered page offers. */
  const freeSlotOf = (shown: { body: string }) =>
    encodeURIComponent(/name="starts_at" id="[^"]+" value="([^"]+)"/.exec(shown.body)![1]!);

  describe('happy path (HTML, no browser)', () => {
    it('renders the slots with a CSP that allows only its own script, and books by a plain form post', async () => {
      const account = await linkAccount();
      const link = await recordWithLink(t, account);
      const path = new URL(link.url).pathname;
      const shown = await page(`${path}?tz=Asia/Tokyo`);
      expect(shown.statusCode).toBe(200);
      expect(shown.headers['content-type']).toBe('text/html; charset=utf-8');
      const csp = String(shown.headers['content-security-policy']);
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("default-src 'none'");
      expect(shown.headers['referrer-policy']).toBe('no-referrer');
      expect(shown.body).toContain('<meta name="viewport"');
      expect(shown.body).toContain('<label for="tz">');
      expect(shown.body).toContain('<option value="Asia/Tokyo" selected>');
      expect(shown.body).not.toMatch(/<script>|style="/);
      const first = /name="starts_at" id="[^"]+" value="([^"]+)"/.exec(shown.body)![1]!;
      const posted = await page(path, {
        method: 'POST',
        form: `starts_at=${encodeURIComponent(first)}&tz=Asia%2FTokyo`,
      });
      expect(posted.statusCode).toBe(303);
      expect(posted.headers.location).toBe(`${path}/confirmed?tz=Asia%2FTokyo`);
      const confirmed = await page(String(posted.headers.location));
      expect(confirmed.statusCode).toBe(200);
      expect(confirmed.body).toContain('Your appointment is booked');
      expect(confirmed.body).toContain('(Asia/Tokyo)');
      // Opened again, the link says it was used, and when.
      const reopened = await page(path);
      expect(reopened.statusCode).toBe(409);
      expect(reopened.body).toContain('Your appointment is booked');
      const script = await page('/book/assets/booking.js');
      expect(script.headers['content-type']).toBe('text/javascript; charset=utf-8');
    });

    it('keeps a calendar’s zone selected that the runtime lists under another name (UTC, Etc/GMT-1, an alias)', async () => {
      for (const zone of ['UTC', 'Etc/GMT-1', 'Asia/Kolkata']) {
        const account = await accountWithLeads(t, { modules: ['booking'] });
        await createCalendar(t, account, { ...ALWAYS_OPEN, time_zone: zone });
        const link = await recordWithLink(t, account);
        const shown = await page(new URL(link.url).pathname);
        expect(shown.statusCode).toBe(200);
        expect(shown.body, zone).toContain(`<option value="${zone}" selected>`);
        expect(shown.body.match(/ selected>/g), zone).toHaveLength(1);
      }
    });
  });

  describe('errors (HTML, no browser)', () => {
    it('answers unknown (404), expired (410) and used (409) links with a clear page, never a stack trace', async () => {
      const unknown = await page('/book/bk_doesnotexist0000');
      expect(unknown.statusCode).toBe(404);
      expect(unknown.body).toContain('Booking link not found');
      const malformed = await page('/book/%3Cscript%3E');
      expect(malformed.statusCode).toBe(404);
      expect(malformed.body).not.toContain('<script>');
      const account = await linkAccount();
      const link = await recordWithLink(t, account);
      await t.db
        .updateTable('booking_links')
        .set({ expires_at: new Date(Date.now() - 1000) })
        .where('account_id', '=', account.id)
        .execute();
      const expired = await page(new URL(link.url).pathname);
      expect(expired.statusCode).toBe(410);
      expect(expired.body).toContain('This booking link has expired');
      expect(expired.headers['content-security-policy']).toBeDefined();
      const post = await page(new URL(link.url).pathname, {
        method: 'POST',
        form: 'starts_at=2030-01-01T00:00:00Z',
      });
      expect(post.statusCode).toBe(410);
    });

    it('shows a "not available" page (403, English or German) once the account lost the module, and books nothing', async () => {
      const account = await linkAccount();
      const link = await recordWithLink(t, account);
      const used = await recordWithLink(t, account, 'used@example.com');
      const path = new URL(link.url).pathname;
      const usedPath = new URL(used.url).pathname;
      const booked = await page(usedPath, {
        method: 'POST',
        form: `starts_at=${freeSlotOf(await page(usedPath))}`,
      });
      expect(booked.statusCode).toBe(303);
      const slot = freeSlotOf(await page(path));
      await setModules(t, account.id, ['crm', 'distribution']);
      const english = await page(path);
      expect(english.statusCode).toBe(403);
      expect(english.body).toContain('Booking is not available');
      expect(english.body).toContain('lang="en"');
      expect(english.body).not.toContain('starts_at');
      expect(english.headers['content-security-policy']).toBeDefined();
      const german = await t.app.inject({
        method: 'GET',
        url: path,
        headers: { 'accept-language': 'de-DE,de;q=0.9' },
      });
      expect(german.statusCode).toBe(403);
      expect(german.body).toContain('Buchung nicht verfügbar');
      expect(german.body).toContain('lang="de"');
      expect(german.headers['content-language']).toBe('de');
      const post = await page(path, { method: 'POST', form: `starts_at=${slot}` });
      expect(post.statusCode).toBe(403);
      expect(post.body).toContain('Booking is not available');
      const confirmation = await page(`${usedPath}/confirmed`);
      expect(confirmation.statusCode).toBe(403);
      expect(confirmation.body).toContain('Booking is not available');
      expect(await appointmentCount(t, account.id)).toBe(1);
    });

    it('shows the slots again with an alert when the time was taken or none was picked', async () => {
      const account = await linkAccount();
      const link = await recordWithLink(t, account);
      const path = new URL(link.url).pathname;
      const none = await page(path, { method: 'POST', form: 'tz=Europe%2FBerlin' });
      expect(none.statusCode).toBe(422);
      expect(none.body).toContain('role="alert"');
      const offGrid = await page(path, { method: 'POST', form: 'starts_at=2020-01-01T00:00:00Z' });
      expect(offGrid.statusCode).toBe(409);
      expect(offGrid.body).toContain('That time was just taken');
    });
  });

  describe('concurrency', () => {
    it('books one capacity-1 slot once when 20 visitors post it at the same time', async () => {
      const account = await linkAccount();
      const links = await Promise.all(
        Array.from({ length: 20 }, (_, index) => recordWithLink(t, account, `v${index}@example.com`)),
      );
      const slot = new Date(Math.ceil((Date.now() + 86_400_000) / 1_800_000) * 1_800_000).toISOString();
      const answers = await Promise.all(
        links.map((link) =>
          page(new URL(link.url).pathname, { method: 'POST', form: `starts_at=${encodeURIComponent(slot)}` }),
        ),
      );
      expect(answers.filter((answer) => answer.statusCode === 303)).toHaveLength(1);
      expect(answers.filter((answer) => answer.statusCode === 409)).toHaveLength(19);
      expect(await appointmentCount(t, account.id)).toBe(1);
    });
  });

  describe.skipIf(!hasChromium)('in headless Chromium', () => {
    it('with JavaScript: preselects the browser’s zone, changes zone and days without reloading, books, confirms', async () => {
      const account = await linkAccount();
      const link = await recordWithLink(t, account);
      const context = await browser.newContext({
        timezoneId: 'America/New_York',
        viewport: { width: 375, height: 800 },
      });
      const tab = await context.newPage();
      const problems: string[] = [];
      // Errors of the page (a CSP violation, a script error, a failed request); the browser's own
      // favicon request is no part of the page.
      tab.on('console', (message) => {
        if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) {
          problems.push(message.text());
        }
      });
      tab.on('response', (response) => {
        if (response.status() >= 400 && !response.url().endsWith('/favicon.ico')) {
          problems.push(`${response.status()} ${response.url()}`);
        }
      });
      tab.on('pageerror', (error) => problems.push(error.message));
      tab.setDefaultTimeout(5_000);
      await tab.goto(link.url);
      await tab
        .locator('#slots[data-loaded="true"][data-zone="America/New_York"]')
        .waitFor()
        .catch((error: Error) => {
          throw new Error(`${error.message}\n${problems.join('\n')}`);
        });
      expect(await tab.locator('#tz').inputValue()).toBe('America/New_York');
      await tab.screenshot({ path: path.join(ARTIFACTS, `booking-slots-js-${kind}.png`), fullPage: false });
      // A marker on the window survives only if the page is not reloaded.
      await tab.evaluate('window.notReloaded = true');
      // Changes are polled from the test: evaluate() of a string runs through the protocol, where
      // the page's CSP (no eval) does not apply, unlike waitForFunction's polling inside the page.
      await tab.locator('#tz').selectOption('Asia/Tokyo');
      await tab.locator('#slots[data-zone="Asia/Tokyo"]').waitFor();
      const week = await tab.locator('#slots').getAttribute('data-week');
      await tab.locator('#later').click();
      await expect.poll(() => tab.evaluate("document.getElementById('slots').dataset.week")).not.toBe(week);
      const later = await tab.locator('#slots').getAttribute('data-week');
      expect(later! > week!).toBe(true);
      await tab.locator('#earlier').click();
      await expect.poll(() => tab.evaluate("document.getElementById('slots').dataset.week")).not.toBe(later);
      expect(await tab.evaluate('window.notReloaded')).toBe(true);
      const radio = tab.locator('input[name="starts_at"]').nth(2);
      const startsAt = await radio.getAttribute('value');
      await tab.locator('#slots label').nth(2).click();
      await tab.locator('#book').click();
      await tab.waitForURL(/\/confirmed/);
      await expect(tab.locator('h1').textContent()).resolves.toBe('Your appointment is booked');
      await expect(tab.locator('main').textContent()).resolves.toContain('(Asia/Tokyo)');
      await tab.screenshot({ path: path.join(ARTIFACTS, `booking-page-js-${kind}.png`), fullPage: true });
      expect(problems).toEqual([]);
      const appointments = await t.request({
        method: 'GET',
        url: '/api/v1/booking/appointments',
        key: account.apiKey,
      });
      expect(appointments.json().appointments.map((a: { starts_at: string }) => a.starts_at)).toEqual([
        startsAt,
      ]);
      await context.close();
    });

    it('without JavaScript: a zone form, a plain post by keyboard, then the confirmation page', async () => {
      const account = await linkAccount();
      const link = await recordWithLink(t, account);
      const context = await browser.newContext({
        javaScriptEnabled: false,
        viewport: { width: 375, height: 800 },
      });
      const tab = await context.newPage();
      await tab.goto(link.url);
      expect(await tab.locator('#tz').inputValue()).toBe('Europe/Berlin');
      await tab.locator('#tz').selectOption('Asia/Tokyo');
      await tab.locator('#zone-form button').click();
      await tab.waitForURL(/tz=Asia%2FTokyo/);
      expect(await tab.locator('#tz').inputValue()).toBe('Asia/Tokyo');
      const radio = tab.locator('input[name="starts_at"]').first();
      const startsAt = await radio.getAttribute('value');
      await radio.focus();
      await tab.keyboard.press('Space');
      await tab.locator('#book').focus();
      await tab.keyboard.press('Enter');
      await tab.waitForURL(/\/confirmed/);
      await expect(tab.locator('h1').textContent()).resolves.toBe('Your appointment is booked');
      await expect(tab.locator('main').textContent()).resolves.toContain('(Asia/Tokyo)');
      await tab.screenshot({ path: path.join(ARTIFACTS, `booking-page-nojs-${kind}.png`), fullPage: true });
      const appointments = await t.request({
        method: 'GET',
        url: '/api/v1/booking/appointments',
        key: account.apiKey,
      });
      expect(appointments.json().appointments.map((a: { starts_at: string }) => a.starts_at)).toEqual([
        startsAt,
      ]);
      await context.close();
    });
  });
});

/** The night summer time ends in Berlin (2026-10-25): 02:00–02:59 happen twice, CEST then CET. */
describe.each(TEST_DATABASES)('the booking page in the hour that repeats, on %s', (kind) => {
  let t: TestApp;
  let base = 'http://127.0.0.1:0';
  let browser: Browser;
  beforeAll(async () => {
    const clock = testClock('2026-10-24T08:00:00Z');
    t = await startTestApp(kind, { publicUrl: () => base, now: clock.now });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    if (hasChromium) browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  /** The labels of 25 October's slots from 01:30 to 03:00 local, in the page's order. */
  const nightLabels = (labels: string[]) => labels.slice(3, 9);
  const NIGHT = ['01:30', '02:00 CEST', '02:30 CEST', '02:00 CET', '02:30 CET', '03:00'];
  const REPEATED_SECOND = '2026-10-25T01:30:00.000Z';

  async function linkPage() {
    const account = await accountWithLeads(t, { modules: ['booking'] });
    await createCalendar(t, account, ALWAYS_OPEN);
    const link = await recordWithLink(t, account);
    return { account, url: `${link.url}?tz=Europe%2FBerlin&week=2026-10-25` };
  }

  it('labels the two 02:30s with their zone names in the HTML, and the confirmation names the one booked', async () => {
    const { url } = await linkPage();
    const shown = await t.app.inject({ method: 'GET', url: new URL(url).pathname + new URL(url).search });
    expect(shown.statusCode).toBe(200);
    const day = /<legend>Sunday 25 October<\/legend>(.*?)<\/fieldset>/s.exec(shown.body)![1]!;
    const labels = [...day.matchAll(/<label for="[^"]+">([^<]+)<\/label>/g)].map((match) => match[1]!);
    expect(labels.slice(0, 3)).toEqual(['00:00', '00:30', '01:00']);
    expect(nightLabels(labels)).toEqual(NIGHT);
    expect(labels).toContain('12:00');
    expect(day).toContain(`value="${REPEATED_SECOND}"`);
    const path = new URL(url).pathname;
    const posted = await t.app.inject({
      method: 'POST',
      url: path,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: `starts_at=${encodeURIComponent(REPEATED_SECOND)}&tz=Europe%2FBerlin`,
    });
    expect(posted.statusCode, posted.body).toBe(303);
    const confirmed = await t.app.inject({ method: 'GET', url: String(posted.headers.location) });
    expect(confirmed.body).toContain('Sunday 25 October 2026, 02:30 CET–03:00');
  });

  it.skipIf(!hasChromium)('labels them the same when the page’s script renders the slots', async () => {
    const { url } = await linkPage();
    const context = await browser.newContext({ timezoneId: 'Europe/Berlin' });
    const tab = await context.newPage();
    tab.setDefaultTimeout(5_000);
    await tab.goto(url);
    await tab.locator('#slots[data-loaded="true"]').waitFor();
    const day = tab.locator('#slots fieldset', { hasText: 'Sunday 25 October' });
    const labels = await day.locator('label').allTextContents();
    expect(nightLabels(labels)).toEqual(NIGHT);
    await mkdir(ARTIFACTS, { recursive: true });
    await day.screenshot({ path: path.join(ARTIFACTS, `booking-repeated-hour-${kind}.png`) });
    await context.close();
  });
});

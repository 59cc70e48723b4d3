// The console's browser tests: the real service listening on 127.0.0.1 (in this process, over a
// test database), Debian's Chromium driven by playwright-core, axe-core for accessibility, and
// screenshots in test-artifacts/console/.
import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { expect } from 'vitest';
import type { DatabaseKind } from '../../src/db/client.ts';
import { startTestApp, type TestApp, type TestAppOptions } from '../helpers/app.ts';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const hasChromium = existsSync(CHROMIUM);
export const ARTIFACTS = path.resolve('test-artifacts/console');
const AXE_SCRIPT = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

if (!hasChromium)
  console.warn(`Console browser tests skipped: no Chromium at ${CHROMIUM} (set CHROMIUM_PATH)`);

export interface ConsoleServer {
  t: TestApp;
  /** http://127.0.0.1:<port> */
  base: string;
  browser: Browser;
  close(): Promise<void>;
}

/** The service listening on a free port of 127.0.0.1, and a headless Chromium. */
export async function startConsoleServer(
  kind: DatabaseKind,
  options: TestAppOptions = {},
): Promise<ConsoleServer> {
  let base = 'http://127.0.0.1:0';
  const t = await startTestApp(kind, { publicUrl: () => base, ...options });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  await mkdir(ARTIFACTS, { recursive: true });
  return {
    t,
    base,
    browser,
    async close() {
      await browser.close().catch(() => {});
      await t.close();
    },
  };
}

export interface PageOptions {
  /** The browser's language (Accept-Language and navigator.languages); English by default. */
  locale?: string;
  /** Viewport width in CSS pixels; 1280 by default. */
  width?: number;
}

/** A fresh browser profile (no cookies, no localStorage) and a page in it. */
export async function newPage(
  server: ConsoleServer,
  options: PageOptions = {},
): Promise<{ context: BrowserContext; page: Page }> {
  const width = options.width ?? 1280;
  const context = await server.browser.newContext({
    baseURL: server.base,
    locale: options.locale ?? 'en-GB',
    viewport: { width, height: width < 600 ? 812 : 900 },
    ...(width < 600 ? { deviceScaleFactor: 2, isMobile: true, hasTouch: true } : {}),
  });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error' && !/Failed to load resource/.test(message.text()))
      problems.push(`console error: ${message.text()}`);
  });
  (page as Page & { problems: string[] }).problems = problems;
  return { context, page };
}

/** Script errors the page reported (uncaught exceptions, console.error) so far. */
export function pageProblems(page: Page): string[] {
  return (page as Page & { problems?: string[] }).problems ?? [];
}

/** A session through the API (decisions §14): the cookie and the CSRF token, for fetch calls. */
export async function apiSession(
  base: string,
  credentials: { email: string; password: string } | { token: string },
): Promise<{ cookie: string; csrf: string; user: any }> {
  const response = await fetch(`${base}/api/v1/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(credentials),
  });
  const body = (await response.json()) as any;
  expect(response.status, JSON.stringify(body)).toBe(200);
  const cookie = (response.headers.get('set-cookie') ?? '').split(';')[0]!;
  expect(cookie).toMatch(/^leads_session=/);
  return { cookie, csrf: body.csrf_token, user: body.user };
}

/** Signs in through the console's own sign-in page and waits for the records list. */
export async function signInThroughPage(page: Page, email: string, password: string): Promise<void> {
  await page.goto('/login');
  await page.getByLabel(/^(Email|E-Mail)/).fill(email);
  await page.getByLabel(/^(Password|Passwort)$/).fill(password);
  await page.getByRole('button', { name: /^(Sign in|Anmelden)$/ }).click();
  await page.waitForURL((url) => !url.pathname.startsWith('/login'));
}

/** Signs the browser profile in through the API: the session cookie goes into the context. */
export async function signInContext(context: BrowserContext, base: string, email: string, password: string) {
  const session = await apiSession(base, { email, password });
  const [name, value] = session.cookie.split('=') as [string, string];
  await context.addCookies([{ name, value, url: base, httpOnly: true, sameSite: 'Lax' }]);
  return session;
}

/**
 * Runs axe-core on the page as it is and fails on serious or critical violations (the rest
 * are printed). `label` names the screen in the failure.
 */
export async function checkAccessibility(page: Page, label: string): Promise<void> {
  // Strings, not functions: the test files are type-checked for Node, without the DOM's names.
  // Evaluated through the browser's debugging protocol, which the page's CSP (script-src 'self')
  // does not govern; a script tag would be refused, as it should be.
  const loaded = await page.evaluate("typeof window.axe !== 'undefined'");
  if (!loaded) await page.evaluate(`${await readFile(AXE_SCRIPT, 'utf8')}\n;undefined`);
  const result: any = await page.evaluate("window.axe.run(document, { resultTypes: ['violations'] })");
  const violations = (result.violations as any[]).map((violation) => ({
    id: violation.id,
    impact: violation.impact as string,
    help: violation.help as string,
    targets: (violation.nodes as any[]).slice(0, 5).map((node) => node.target.join(' ')),
  }));
  const blocking = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  const minor = violations.filter((v) => !blocking.includes(v));
  if (minor.length > 0) console.warn(`axe (${label}), minor:`, JSON.stringify(minor));
  expect(blocking, `axe on ${label}: ${JSON.stringify(blocking)}`).toEqual([]);
}

/** A full-page screenshot in test-artifacts/console/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oneDatabase } from '../helpers/databases.ts';
import {
  type ConsoleServer,
  checkAccessibility,
  hasChromium,
  newPage,
  pageProblems,
  screenshot,
  startConsoleServer,
} from './browser.ts';

describe.skipIf(!hasChromium).each(oneDatabase('pglite'))('the console before signing in on %s', (kind) => {
  let server: ConsoleServer;
  beforeAll(async () => {
    server = await startConsoleServer(kind);
  });
  afterAll(async () => server?.close());

  it('leads every console address to the sign-in page, in the browser language, accessible at 375 px', async () => {
    const { context, page } = await newPage(server, { locale: 'de-DE', width: 375 });
    try {
      await page.goto('/records?stage=new');
      await page.waitForURL(/\/login\?next=/);
      expect(new URL(page.url()).searchParams.get('next')).toBe('/records?stage=new');
      expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Bei Leadline anmelden');
      expect(await page.evaluate('document.documentElement.lang')).toBe('de');
      await checkAccessibility(page, 'sign-in (de, 375 px)');
      await screenshot(page, `sign-in-de-375-${kind}`);
      // Switching the language is remembered for the next visit.
      await page.getByLabel('Sprache').selectOption('en');
      expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Sign in to Leadline');
      await page.reload();
      expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Sign in to Leadline');
      expect(pageProblems(page)).toEqual([]);
    } finally {
      await context.close();
    }
  });
});

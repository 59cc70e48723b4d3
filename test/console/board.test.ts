// The console's Kanban board in real Chromium: moves by drag, by keyboard and through the API,
// a refused move taken back, the viewer's read-only board, axe-core, screenshots at 375 px.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestAccount } from '../helpers/app.ts';
import { oneDatabase } from '../helpers/databases.ts';
import { addPersonWithPassword, PASSWORD } from '../people/support.ts';
import {
  type ConsoleServer,
  checkAccessibility,
  hasChromium,
  newPage,
  pageProblems,
  screenshot,
  signInContext,
  startConsoleServer,
} from './browser.ts';
import { DEAL_ENTITY, STAGES } from './crm-support.ts';

describe.skipIf(!hasChromium).each(oneDatabase('postgres'))('the console board on %s', (kind) => {
  let server: ConsoleServer;
  let account: TestAccount;
  const admin = 'admin@board.test';
  const viewer = 'viewer@board.test';

  const call = async (method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown) => {
    const response = await server.t.request({ method, url, key: account.apiKey, body });
    expect(response.statusCode, response.body).toBeLessThan(300);
    return response.json();
  };
  const createRecord = async (first: string, last: string): Promise<string> =>
    (
      await call('POST', '/api/v1/records', {
        entity: 'deal',
        fields: { first_name: first, last_name: last, email: `${first.toLowerCase()}@example.com` },
        meta: { source: 'web' },
      })
    ).id;
  const stageOf = async (id: string): Promise<string> =>
    (await call('GET', `/api/v1/records/${id}`)).crm.stage;

  const column = (page: Page, stage: string) => page.getByRole('grid', { name: `Records in ${stage}` });
  const card = (page: Page, stage: string, name: string) =>
    column(page, stage).getByRole('row').filter({ hasText: name });

  async function openBoard(email: string, width?: number) {
    const { context, page } = await newPage(server, { width });
    await signInContext(context, server.base, email, PASSWORD);
    await page.goto('/board?entity=deal&pipeline=Sales');
    await page.getByRole('heading', { level: 1, name: 'Board: Sales' }).waitFor();
    for (const stage of STAGES) await column(page, stage).waitFor();
    return { context, page };
  }

  beforeAll(async () => {
    server = await startConsoleServer(kind);
    account = await server.t.createAccount({ modules: ['crm'] });
    await call('PUT', '/api/v1/settings/entities/deal', DEAL_ENTITY);
    for (const [email, role] of [
      [admin, 'admin'],
      [viewer, 'viewer'],
    ] as const) {
      await addPersonWithPassword(server.t, account, { email, role });
    }
  });
  afterAll(async () => server?.close());

  it('moves a card by dragging it to another column, through the stage move', async () => {
    const id = await createRecord('Ada', 'Drag');
    const { context, page } = await openBoard(admin);
    try {
      const ada = card(page, 'New', 'Ada Drag');
      await ada.waitFor();
      expect(await ada.textContent()).toContain('ada@example.com');
      expect(await ada.textContent()).toContain('Source: web');
      await checkAccessibility(page, 'board');
      await screenshot(page, `board-${kind}`);

      await ada.dragTo(column(page, 'Contacted'));
      await card(page, 'Contacted', 'Ada Drag').waitFor();
      await expect.poll(() => stageOf(id), { timeout: 10_000 }).toBe('Contacted');
      expect(await card(page, 'New', 'Ada Drag').count()).toBe(0);
      await page.getByText('Ada Drag moved to Contacted.').waitFor();
      const history = await call('GET', `/api/v1/records/${id}/history`);
      expect(history.events[0]).toMatchObject({ type: 'stage_changed' });
      expect(pageProblems(page)).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('moves a card by keyboard through its Move menu', async () => {
    const id = await createRecord('Kim', 'Keys');
    const { context, page } = await openBoard(admin);
    try {
      const move = card(page, 'New', 'Kim Keys').getByRole('button', { name: 'Move Kim Keys' });
      await move.focus();
      await page.keyboard.press('Enter');
      const menu = page.getByRole('menu', { name: 'Move Kim Keys' });
      await menu.waitFor();
      // The menu lists the other stages in order: Contacted, Won, Lost.
      expect(await menu.getByRole('menuitem').allTextContents()).toEqual(['Contacted', 'Won', 'Lost']);
      // Opened by keyboard, the menu focuses its first item; one step down is "Won".
      expect(await page.evaluate('document.activeElement.textContent')).toBe('Contacted');
      await page.keyboard.press('ArrowDown');
      expect(await page.evaluate('document.activeElement.textContent')).toBe('Won');
      await page.keyboard.press('Enter');
      await card(page, 'Won', 'Kim Keys').waitFor();
      await expect.poll(() => stageOf(id), { timeout: 10_000 }).toBe('Won');
      expect(pageProblems(page)).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('shows records created and moved elsewhere within a few seconds', async () => {
    const id = await createRecord('Lia', 'Live');
    const { context, page } = await openBoard(admin);
    try {
      await card(page, 'New', 'Lia Live').waitFor();
      await call('POST', `/api/v1/crm/records/${id}/stage`, { stage: 'Contacted' });
      const later = await createRecord('Neo', 'New');
      await card(page, 'Contacted', 'Lia Live').waitFor({ timeout: 10_000 });
      await card(page, 'New', 'Neo New').waitFor({ timeout: 10_000 });
      expect(await card(page, 'New', 'Lia Live').count()).toBe(0);
      expect(later).toBeTruthy();
    } finally {
      await context.close();
    }
  });

  it('puts a refused move back and says why (a stage removed while the board was open)', async () => {
    const id = await createRecord('Rex', 'Refused');
    const { context, page } = await openBoard(admin);
    try {
      await card(page, 'New', 'Rex Refused').waitFor();
      // Another admin removes "Lost" from the pipeline: the stage is archived, moves into it are refused.
      await call('PUT', '/api/v1/settings/entities/deal', {
        ...DEAL_ENTITY,
        pipelines: [{ name: 'Sales', stages: ['New', 'Contacted', 'Won'] }],
      });
      await card(page, 'New', 'Rex Refused').dragTo(column(page, 'Lost'));
      const alert = page.getByRole('alert').filter({ hasText: 'Rex Refused could not be moved to Lost' });
      await alert.waitFor();
      expect(await alert.textContent()).toContain('the stage no longer exists');
      await card(page, 'New', 'Rex Refused').waitFor();
      expect(await stageOf(id)).toBe('New');
      // The board reads the pipeline again: the removed stage's column goes.
      await column(page, 'Lost').waitFor({ state: 'detached' });
    } finally {
      await context.close();
      await call('PUT', '/api/v1/settings/entities/deal', DEAL_ENTITY);
    }
  });

  it('shows the board to a viewer without drag or move controls, also at 375 px', async () => {
    const id = await createRecord('Vic', 'Viewer');
    const { context, page } = await openBoard(viewer, 375);
    try {
      const vic = card(page, 'New', 'Vic Viewer');
      await vic.waitFor();
      await page.getByText('Your role can view the board but not move records.').waitFor();
      expect(await page.getByRole('button', { name: /^Move / }).count()).toBe(0);
      expect(await page.getByRole('button', { name: /^Drag / }).count()).toBe(0);
      expect(await page.locator('[draggable="true"]').count()).toBe(0);
      await checkAccessibility(page, 'board (viewer, 375 px)');
      await screenshot(page, `board-viewer-375-${kind}`);
      await vic.dragTo(column(page, 'Contacted'), { force: true }).catch(() => {});
      await page.waitForTimeout(500);
      expect(await stageOf(id)).toBe('New');
      expect(pageProblems(page)).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('lays out the board at 375 px for a member with controls', async () => {
    await createRecord('Mo', 'Mobile');
    const { context, page } = await openBoard(admin, 375);
    try {
      await card(page, 'New', 'Mo Mobile').waitFor();
      await checkAccessibility(page, 'board (375 px)');
      await screenshot(page, `board-375-${kind}`);
      // The page itself does not scroll sideways; the board does.
      expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(true);
    } finally {
      await context.close();
    }
  });
});

// Settings → Pipelines and automations in real Chromium: a stage added and ordered through the
// entity's PUT, an automation refused with the service's 422 next to its field, then created,
// edited and deleted; a member does not get the screen; axe and a 375 px screenshot.
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
import { DEAL_ENTITY } from './crm-support.ts';

describe.skipIf(!hasChromium).each(oneDatabase('pglite'))(
  'the pipelines and automations settings on %s',
  (kind) => {
    let server: ConsoleServer;
    let account: TestAccount;
    const admin = 'admin@settings.test';
    const member = 'member@settings.test';

    const call = async (method: 'GET' | 'PUT', url: string, body?: unknown) => {
      const response = await server.t.request({ method, url, key: account.apiKey, body });
      expect(response.statusCode, response.body).toBeLessThan(300);
      return response.json();
    };

    async function openSettings(email: string, width?: number) {
      const { context, page } = await newPage(server, { width });
      await signInContext(context, server.base, email, PASSWORD);
      await page.goto('/settings/pipelines');
      await page.getByRole('heading', { level: 1, name: 'Pipelines and automations' }).waitFor();
      return { context, page };
    }

    beforeAll(async () => {
      server = await startConsoleServer(kind);
      account = await server.t.createAccount({ modules: ['crm'] });
      await call('PUT', '/api/v1/settings/entities/deal', DEAL_ENTITY);
      for (const [email, role] of [
        [admin, 'admin'],
        [member, 'member'],
      ] as const) {
        await addPersonWithPassword(server.t, account, { email, role });
      }
    });
    afterAll(async () => server?.close());

    it('adds a stage, orders it and saves the pipeline through the entity', async () => {
      const { context, page } = await openSettings(admin);
      try {
        const deal = page.getByRole('region', { name: 'Deal (deal)' });
        await deal.getByRole('list', { name: 'Stages of Sales' }).waitFor();
        await checkAccessibility(page, 'pipelines settings');
        await deal.getByLabel('New stage in Sales').fill('Qualified');
        await deal.getByRole('button', { name: 'Add stage' }).click();
        // Added last; two steps up puts it after Contacted.
        await deal.getByRole('button', { name: 'Move Qualified up' }).click();
        await deal.getByRole('button', { name: 'Move Qualified up' }).click();
        await deal.getByText('Unsaved changes.').waitFor();
        await deal.getByRole('button', { name: 'Save pipelines: Deal' }).click();
        await page.getByText('Pipelines of Deal saved.').waitFor();
        const entity = await call('GET', '/api/v1/settings/entities/deal');
        expect(entity.pipelines).toEqual([
          { name: 'Sales', stages: ['New', 'Contacted', 'Qualified', 'Won', 'Lost'] },
        ]);
        // The rest of the definition went back as it was.
        expect(entity.fields.map((f: { key: string; role: string }) => [f.key, f.role])).toEqual([
          ['first_name', 'first_name'],
          ['last_name', 'last_name'],
          ['email', 'email'],
        ]);
        expect(pageProblems(page)).toEqual([]);
      } finally {
        await context.close();
        await call('PUT', '/api/v1/settings/entities/deal', DEAL_ENTITY);
      }
    });

    it('creates an automation through the form, showing the 422 next to its field first', async () => {
      const { context, page } = await openSettings(admin);
      try {
        await page.getByText('No automations yet.').waitFor();
        await page.getByRole('button', { name: 'New automation' }).click();
        const form = page.getByRole('region', { name: 'New automation' });
        await form.getByLabel('Name').fill('Won note');
        await form.getByRole('button', { name: /Stage that starts it/ }).click();
        await page.getByRole('option', { name: 'Won' }).click();
        const text = form.getByRole('textbox', { name: 'Text' });
        await text.fill('Won by {{nickname}}');
        await form.getByRole('button', { name: 'Create automation' }).click();
        await form.getByText('The service refused the automation').waitFor();
        expect(await text.getAttribute('aria-invalid')).toBe('true');
        expect(await text.getAttribute('aria-describedby')).toBeTruthy();
        expect(await form.locator('.react-aria-FieldError').first().textContent()).toMatch(/nickname/);
        await checkAccessibility(page, 'automation form with errors');

        await text.fill('Won by {{first_name}}');
        await form.getByRole('button', { name: 'Create automation' }).click();
        await page.getByText('Automation Won note created.').waitFor();
        const list = await call('GET', '/api/v1/settings/automations');
        expect(list.automations).toHaveLength(1);
        expect(list.automations[0]).toMatchObject({
          name: 'Won note',
          entity: 'deal',
          pipeline: 'Sales',
          stage: 'Won',
          action: { type: 'note', body: 'Won by {{first_name}}' },
          enabled: true,
        });

        // Edit: switched off.
        await page.getByRole('button', { name: 'Edit Won note' }).click();
        const edit = page.getByRole('region', { name: 'Edit automation Won note' });
        // React Aria's checkbox keeps its input out of sight: the label is what a person clicks.
        await edit.locator('label', { hasText: 'Enabled' }).click();
        expect(await edit.getByRole('checkbox', { name: 'Enabled' }).isChecked()).toBe(false);
        await edit.getByRole('button', { name: 'Save automation' }).click();
        await page.getByText('Automation Won note saved.').waitFor();
        expect((await call('GET', '/api/v1/settings/automations')).automations[0].enabled).toBe(false);

        // Delete, confirmed.
        await page.getByRole('button', { name: 'Delete Won note' }).click();
        await page.getByRole('button', { name: 'Delete', exact: true }).click();
        await page.getByText('Automation Won note deleted.').waitFor();
        expect((await call('GET', '/api/v1/settings/automations')).automations).toEqual([]);
        expect(pageProblems(page)).toEqual([]);
      } finally {
        await context.close();
      }
    }, 60_000);

    it('works at 375 px', async () => {
      const { context, page } = await openSettings(admin, 375);
      try {
        await page.getByRole('list', { name: 'Stages of Sales' }).waitFor();
        await page.getByRole('button', { name: 'New automation' }).click();
        await page.getByRole('region', { name: 'New automation' }).waitFor();
        await checkAccessibility(page, 'pipelines settings (375 px)');
        await screenshot(page, `pipelines-settings-375-${kind}`);
        expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(true);
      } finally {
        await context.close();
      }
    });

    it('is not offered to a member, and says so at its address', async () => {
      const { context, page } = await newPage(server);
      try {
        await signInContext(context, server.base, member, PASSWORD);
        await page.goto('/board');
        await page.getByRole('heading', { level: 1 }).waitFor();
        expect(await page.getByRole('link', { name: 'Pipelines' }).count()).toBe(0);
        await page.goto('/settings/pipelines');
        await page.getByText('Only admins and owners change pipelines and automations.').waitFor();
        expect(await page.getByRole('button', { name: 'New automation' }).count()).toBe(0);
      } finally {
        await context.close();
      }
    });
  },
);

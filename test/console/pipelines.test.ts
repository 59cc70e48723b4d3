// Settings → Pipelines and automations in real Chromium: a stage added and ordered through the
// entity's PUT, an automation refused with the service's 422 next to its field, then created,
// edited and deleted; a member does not get the screen; axe and a 375 px screenshot.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDispatcher, type Dispatcher } from '../../src/outbound/dispatcher.ts';
import type { TestAccount } from '../helpers/app.ts';
import { oneDatabase } from '../helpers/databases.ts';
import { type Receiver, startReceiver, waitFor } from '../outbound/receiver.ts';
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

const silent = { info() {}, warn() {}, error() {} };

describe.skipIf(!hasChromium).each(oneDatabase('pglite'))(
  'the pipelines and automations settings on %s',
  (kind) => {
    let server: ConsoleServer;
    let account: TestAccount;
    let receiver: Receiver;
    let dispatcher: Dispatcher;
    const admin = 'admin@settings.test';
    const member = 'member@settings.test';

    const call = async (method: 'GET' | 'PUT' | 'POST', url: string, body?: unknown) => {
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
      receiver = await startReceiver();
      // Automations run from the queue and send through the engine, retried quickly here.
      server = await startConsoleServer(kind, { queue: {}, outbound: { retryScheduleMs: [50, 50] } });
      dispatcher = createDispatcher(server.t.services.outbound, silent, { idlePollMs: 20 });
      dispatcher.start();
      account = await server.t.createAccount({ modules: ['crm'] });
      await call('PUT', '/api/v1/settings/entities/deal', DEAL_ENTITY);
      for (const [email, role] of [
        [admin, 'admin'],
        [member, 'member'],
      ] as const) {
        await addPersonWithPassword(server.t, account, { email, role });
      }
    });
    afterAll(async () => {
      await dispatcher?.stop(1_000);
      await server?.close();
      await receiver?.close();
    });

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
        // The toast stack's empty parts let clicks through to the page under them (a margin above
        // the toast caught the click meant for the Edit button below it for the toast's life).
        const passesThrough = await page.evaluate(`(() => {
          const box = document.querySelector('.toast').getBoundingClientRect();
          const under = document.elementFromPoint(box.left + 5, box.top - 3);
          return under !== null && under.closest('.toasts') === null;
        })()`);
        expect(passesThrough).toBe(true);
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

    it('names the automation that a stage removal would break, and saves nothing', async () => {
      const made = await call('POST', '/api/v1/settings/automations', {
        name: 'Lost note',
        entity: 'deal',
        stage: 'Lost',
        action: { type: 'note', body: 'Lost {{first_name}}' },
      });
      const { context, page } = await openSettings(admin);
      try {
        const deal = page.getByRole('region', { name: 'Deal (deal)' });
        await deal.getByRole('button', { name: 'Remove Lost' }).click();
        await deal.getByRole('button', { name: 'Save pipelines: Deal' }).click();
        const problem = deal.locator('ul.error-text li', { hasText: 'Lost note' });
        await problem.waitFor();
        expect(await problem.locator('code').textContent()).toBe(`automations.${made.id}.stage`);
        const entity = await call('GET', '/api/v1/settings/entities/deal');
        expect(entity.pipelines[0].stages).toContain('Lost');
        expect(pageProblems(page)).toEqual([]);
      } finally {
        await context.close();
        await server.t.request({
          method: 'DELETE',
          url: `/api/v1/settings/automations/${made.id}`,
          key: account.apiKey,
        });
      }
    }, 60_000);

    it("shows a webhook automation's attempts, the retries of a failing receiver included", async () => {
      receiver.answerAlways({ status: 503 });
      const automation = await call('POST', '/api/v1/settings/automations', {
        name: 'Tell the ERP',
        entity: 'deal',
        stage: 'Won',
        action: { type: 'webhook', url: receiver.url },
      });
      receiver.verifyWith(automation.secret);
      const record = await call('POST', '/api/v1/records', { entity: 'deal', fields: { first_name: 'Ida' } });
      await call('POST', `/api/v1/crm/records/${record.id}/stage`, { stage: 'Won' });
      const url = `/api/v1/settings/automations/${automation.id}/attempts`;
      await waitFor(async () => (await call('GET', url)).attempts.length === 3, 15_000, 'three attempts');
      const { context, page } = await openSettings(admin);
      try {
        const toggle = page.getByRole('button', { name: 'Attempts of Tell the ERP' });
        expect(await toggle.getAttribute('aria-expanded')).toBe('false');
        await toggle.click();
        const attempts = page.getByRole('grid', { name: 'Recent attempts' });
        const rows = attempts.getByRole('row').filter({ hasText: 'record.stage_changed' });
        await expect.poll(() => rows.count()).toBe(3);
        for (const row of await rows.all()) {
          expect(await row.textContent()).toContain('failed');
          expect(await row.textContent()).toContain('503');
        }
        expect(await toggle.getAttribute('aria-expanded')).toBe('true');
        await checkAccessibility(page, 'automation attempts');
        await screenshot(page, `settings-automation-attempts-${kind}`);
        expect(pageProblems(page)).toEqual([]);
      } finally {
        await context.close();
        await server.t.request({
          method: 'DELETE',
          url: `/api/v1/settings/automations/${automation.id}`,
          key: account.apiKey,
        });
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

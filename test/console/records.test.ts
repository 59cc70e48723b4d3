import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestAccount } from '../helpers/app.ts';
import { oneDatabase } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { addPersonWithPassword, addUser, PASSWORD } from '../people/support.ts';
import {
  type ConsoleServer,
  checkAccessibility,
  hasChromium,
  newPage,
  pageProblems,
  screenshot,
  signInContext,
  signInThroughPage,
  startConsoleServer,
} from './browser.ts';

/** The web console's sign-in and records screens in Chromium, against the real service (decisions §14). */
describe.skipIf(!hasChromium).each(oneDatabase('postgres'))('the console records screens on %s', (kind) => {
  let server: ConsoleServer;
  let account: TestAccount;
  let other: TestAccount;
  const people: Record<'member' | 'viewer', string> = { member: '', viewer: '' };

  beforeAll(async () => {
    server = await startConsoleServer(kind);
    const { t } = server;
    account = await accountWithLeads(t, { modules: ['crm'] });
    other = await accountWithLeads(t);
    // The account's first user is its owner; the people under test come after.
    await addUser(t, account, { email: `owner-${kind}@console.test`, name: 'Owner' });
    for (const role of ['member', 'viewer'] as const) {
      const email = `${role}-${kind}@console.test`;
      await addPersonWithPassword(t, account, { email, name: `${role} person`, role });
      people[role] = email;
    }
  });
  afterAll(async () => server?.close());

  const createRecord = async (fields: Record<string, unknown>, who = account, extra: object = {}) => {
    const response = await server.t.request({
      method: 'POST',
      url: '/api/v1/records',
      key: who.apiKey,
      body: { entity: 'lead', fields, ...extra },
    });
    expect(response.statusCode, response.body).toBe(201);
    return response.json().id as string;
  };
  const readRecord = async (id: string) =>
    (await server.t.request({ method: 'GET', url: `/api/v1/records/${id}`, key: account.apiKey })).json();

  describe('happy path', () => {
    it('signs in through the page, lists records with a filter, and shows a new record without reloading', {
      timeout: 90_000,
    }, async () => {
      await createRecord({ email: 'ada@lovelace.test', first_name: 'Ada', last_name: 'Lovelace' });
      await createRecord({ email: 'grace@hopper.test', first_name: 'Grace', last_name: 'Hopper' });
      const { context, page } = await newPage(server);
      try {
        await signInThroughPage(page, people.member, PASSWORD);
        await page.waitForURL('**/records');
        const table = page.getByRole('grid', { name: 'Records' });
        await table.getByRole('row', { name: /Ada Lovelace/ }).waitFor();
        await checkAccessibility(page, 'records list');
        await screenshot(page, `records-list-${kind}`);

        await page.getByLabel('Search name or email').fill('hopper');
        await page.waitForURL(/q=hopper/);
        await table.getByRole('row', { name: /Ada Lovelace/ }).waitFor({ state: 'detached' });
        expect(await table.getByRole('row', { name: /Grace Hopper/ }).count()).toBe(1);

        // A record created through the API while the list is open appears by itself.
        const started = Date.now();
        await createRecord({ email: 'grace.two@hopper.test', first_name: 'Grace', last_name: 'Hopper II' });
        await table.getByRole('row', { name: /Grace Hopper II/ }).waitFor({ timeout: 10_000 });
        expect(Date.now() - started).toBeLessThan(10_000);
        await createRecord({ email: 'alan@turing.test', first_name: 'Alan', last_name: 'Turing' });
        // …but only when it matches the filter.
        await page.waitForTimeout(4000);
        expect(await table.getByRole('row', { name: /Alan Turing/ }).count()).toBe(0);

        // The columns picked are remembered in this browser.
        await page.getByRole('button', { name: 'Columns' }).click();
        await page.getByRole('dialog').getByText('Updated').click();
        await page.keyboard.press('Escape');
        await table.getByRole('columnheader', { name: 'Updated' }).waitFor();
        await table.getByRole('row', { name: /Grace Hopper II/ }).waitFor();
        await page.reload();
        await page
          .getByRole('grid', { name: 'Records' })
          .getByRole('columnheader', { name: 'Updated' })
          .waitFor();
        expect(pageProblems(page)).toEqual([]);
      } finally {
        await context.close();
      }
    });

    it('edits a field and adds a note on the record page (checked through the API)', async () => {
      const id = await createRecord({ email: 'edit@console.test', first_name: 'Edith', company: 'Old Ltd' });
      const { context, page } = await newPage(server);
      try {
        await signInContext(context, server.base, people.member, PASSWORD);
        await page.goto(`/records/${id}`);
        await page.getByRole('heading', { level: 1, name: 'Edith' }).waitFor();
        await checkAccessibility(page, 'record page');
        await page.getByLabel('Company').fill('New GmbH');
        await page.getByRole('button', { name: 'Save changes' }).click();
        await page.getByRole('status').getByText('Changes saved.').waitFor();
        expect((await readRecord(id)).fields.company).toBe('New GmbH');

        await page.getByLabel('Note', { exact: true }).fill('Called back, wants an offer');
        await page.getByRole('button', { name: 'Add note' }).click();
        await page.locator('.notes').getByText('Called back, wants an offer').waitFor();
        const history = await server.t.request({
          method: 'GET',
          url: `/api/v1/records/${id}/history`,
          key: account.apiKey,
        });
        expect(history.json().events.map((e: { type: string }) => e.type)).toContain('note_added');
        await screenshot(page, `record-page-${kind}`);
        expect(pageProblems(page)).toEqual([]);
      } finally {
        await context.close();
      }
    });

    it('renders German for a German browser and fits 375 px with a menu button', async () => {
      const id = await createRecord({ email: 'mobil@console.test', first_name: 'Mia', last_name: 'Mobil' });
      const { context, page } = await newPage(server, { locale: 'de-DE', width: 375 });
      try {
        await signInContext(context, server.base, people.member, PASSWORD);
        await page.goto('/records');
        await page.getByRole('heading', { level: 1, name: 'Datensätze' }).waitFor();
        expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(375);
        const menu = page.getByRole('button', { name: 'Menü' });
        expect(await menu.getAttribute('aria-expanded')).toBe('false');
        await menu.click();
        await page.getByRole('button', { name: 'Abmelden' }).waitFor();
        await checkAccessibility(page, 'records list (de, 375 px)');
        await screenshot(page, `records-list-de-375-${kind}`);
        await page.goto(`/records/${id}`);
        await page.getByRole('heading', { name: 'Felder' }).waitFor();
        expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(375);
        await checkAccessibility(page, 'record page (de, 375 px)');
        await screenshot(page, `record-page-de-375-${kind}`);
      } finally {
        await context.close();
      }
    });

    it('lets the owner of a first-start link set a password without a current one, then sign in with it', async () => {
      const { t } = server;
      const email = `first-${kind}@console.test`;
      const userId = await addUser(t, account, { email, name: 'First owner', role: 'admin' });
      const token = await t.services.sessions.issueLink(account.id, userId, 60_000);
      const { context, page } = await newPage(server);
      try {
        await page.goto(`/sign-in/${token}`);
        await page.waitForURL('**/records');
        await page.getByRole('link', { name: 'Set a password' }).click();
        await page.getByRole('heading', { level: 1, name: 'Set your password' }).waitFor();
        expect(await page.getByLabel('Current password').count()).toBe(0);
        await checkAccessibility(page, 'set password');
        await page.getByLabel('New password', { exact: true }).fill('a new password 1');
        await page.getByLabel('Repeat the new password').fill('a new password 1');
        await page.getByRole('button', { name: 'Save password' }).click();
        await page
          .getByRole('status')
          .getByText(/Your password is set/)
          .waitFor();
        await page.goto('/records');
        await page.getByRole('button', { name: 'Sign out' }).click();
        await page.waitForURL(/\/login/);
        await signInThroughPage(page, email, 'a new password 1');
        await page.getByRole('heading', { level: 1, name: 'Records' }).waitFor();
      } finally {
        await context.close();
      }
    });
  });

  describe('errors', () => {
    it('says so on a wrong password', async () => {
      const { context, page } = await newPage(server);
      try {
        await page.goto('/login');
        await page.getByLabel('Email').fill(people.viewer);
        await page.getByLabel('Password', { exact: true }).fill('not the password');
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.getByRole('alert').getByText('The email or the password is wrong.').waitFor();
        await checkAccessibility(page, 'sign-in with an error');
        // The emailed link: the page says it is on its way, whether or not the address is known.
        await page.getByRole('button', { name: 'Email me a sign-in link' }).click();
        await page.getByRole('status').getByText(`If ${people.viewer} belongs to a person`).waitFor();
      } finally {
        await context.close();
      }
    });

    it('shows the not-found page for an unknown record', async () => {
      const { context, page } = await newPage(server);
      try {
        await signInContext(context, server.base, people.member, PASSWORD);
        await page.goto(`/records/${crypto.randomUUID()}`);
        await page.getByRole('heading', { level: 1, name: 'Not found' }).waitFor();
        await page.goto('/records/not-an-id');
        await page.getByRole('heading', { level: 1, name: 'Not found' }).waitFor();
        await page.goto('/no/such/screen');
        await page.getByRole('heading', { level: 1, name: 'Not found' }).waitFor();
        await checkAccessibility(page, 'not found');
      } finally {
        await context.close();
      }
    });
  });

  describe('security', () => {
    it("answers another account's record id with the not-found page", async () => {
      const foreign = await createRecord({ email: 'foreign@console.test', company: 'Foreign Co' }, other);
      const { context, page } = await newPage(server);
      try {
        await signInContext(context, server.base, people.member, PASSWORD);
        await page.goto(`/records/${foreign}`);
        await page.getByRole('heading', { level: 1, name: 'Not found' }).waitFor();
        expect(await page.getByText('Foreign Co').count()).toBe(0);
      } finally {
        await context.close();
      }
    });

    it('shows a viewer the record read-only, and the service refuses a viewer’s change', async () => {
      const id = await createRecord({ email: 'viewer@console.test', company: 'Read Only AG' });
      const { context, page } = await newPage(server);
      try {
        const session = await signInContext(context, server.base, people.viewer, PASSWORD);
        await page.goto(`/records/${id}`);
        await page.getByRole('heading', { level: 1, name: 'Read Only AG' }).waitFor();
        await page.getByText('Your role can read this record but not change it.').waitFor();
        expect(await page.getByRole('button', { name: 'Save changes' }).count()).toBe(0);
        expect(await page.getByRole('button', { name: 'Add note' }).count()).toBe(0);
        expect(await page.getByRole('textbox').count()).toBe(0);
        await checkAccessibility(page, 'record page (viewer)');
        const refused = await fetch(`${server.base}/api/v1/records/${id}`, {
          method: 'PATCH',
          headers: {
            cookie: session.cookie,
            'x-csrf-token': session.csrf,
            'content-type': 'application/json',
          },
          body: JSON.stringify({ fields: { company: 'Changed' } }),
        });
        expect(refused.status).toBe(403);
        expect((await readRecord(id)).fields.company).toBe('Read Only AG');
      } finally {
        await context.close();
      }
    });

    it('signs a member out on the server: the old cookie is refused afterwards', async () => {
      const { context, page } = await newPage(server);
      try {
        const session = await signInContext(context, server.base, people.member, PASSWORD);
        await page.goto('/records');
        await page.getByRole('button', { name: 'Sign out' }).click();
        await page.waitForURL(/\/login/);
        const after = await fetch(`${server.base}/api/v1/session`, { headers: { cookie: session.cookie } });
        expect(after.status).toBe(401);
      } finally {
        await context.close();
      }
    });

    it('leads back to the sign-in page once the session ends elsewhere', async () => {
      const { context, page } = await newPage(server);
      try {
        const session = await signInContext(context, server.base, people.member, PASSWORD);
        await page.goto('/records');
        await page.getByRole('heading', { level: 1, name: 'Records' }).waitFor();
        const ended = await fetch(`${server.base}/api/v1/session`, {
          method: 'DELETE',
          headers: { cookie: session.cookie, 'x-csrf-token': session.csrf },
        });
        expect(ended.status, await ended.text()).toBe(204);
        // The list's next poll gets 401 and the console signs out.
        await page.waitForURL('**/login**', { timeout: 10_000 });
      } finally {
        await context.close();
      }
    });

    // Last: the sign-in limit counts refusals per client address too, and every browser here is 127.0.0.1.
    it('says how long to wait after too many failed sign-ins', async () => {
      const { context, page } = await newPage(server);
      try {
        await page.goto('/login');
        const email = `limited-${kind}@console.test`;
        for (let i = 0; i < 11; i++) {
          await fetch(`${server.base}/api/v1/session`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ email, password: 'wrong password' }),
          });
        }
        await page.getByLabel('Email').fill(email);
        await page.getByLabel('Password', { exact: true }).fill('wrong password');
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page
          .getByRole('alert')
          .getByText(/Too many requests\. Try again in \d+ seconds\./)
          .waitFor();
      } finally {
        await context.close();
      }
    });
  });
});

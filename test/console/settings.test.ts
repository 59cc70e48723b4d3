// The settings screens and the intake log in real Chromium: effects checked through the API
// with the values the screens showed, a real webhook receiver, axe-core on every screen.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestAccount } from '../helpers/app.ts';
import { oneDatabase } from '../helpers/databases.ts';
import { putEntity } from '../helpers/fixtures.ts';
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

const ENTITY = {
  name: 'Lead',
  fields: [
    { key: 'first_name', label: 'First name', type: 'text', role: 'first_name' },
    { key: 'email', label: 'Email', type: 'text', format: 'email', required: true, role: 'email' },
    { key: 'interest', label: 'Interest', type: 'select', options: ['Solar', 'Heat pump'] },
  ],
  pipelines: [{ name: 'Sales', stages: ['New', 'Won'] }],
};

interface Received {
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

describe.skipIf(!hasChromium).each(oneDatabase('postgres'))('console settings screens on %s', (kind) => {
  let server: ConsoleServer;
  let account: TestAccount;
  const ownerEmail = `owner-${kind}@settings.test`;
  let receiver: Server;
  let receiverUrl: string;
  const received: Received[] = [];

  beforeAll(async () => {
    server = await startConsoleServer(kind);
    account = await server.t.createAccount({ modules: ['crm', 'booking'] });
    await putEntity(server.t, account, 'lead', ENTITY);
    await addPersonWithPassword(server.t, account, { email: ownerEmail, name: 'Olga Owner' });
    receiver = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk) => {
        body += chunk;
      });
      request.on('end', () => {
        received.push({ headers: request.headers, body });
        response.writeHead(200, { 'content-type': 'text/plain' }).end('thanks');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
  });
  afterAll(async () => {
    await new Promise((resolve) => receiver?.close(resolve));
    await server?.close();
  });

  /** A page signed in as the owner. */
  async function ownerPage(width?: number) {
    const opened = await newPage(server, { width });
    await signInContext(opened.context, server.base, ownerEmail, PASSWORD);
    return opened;
  }

  const call = (path: string, init: RequestInit & { key?: string } = {}) =>
    fetch(`${server.base}${path}`, {
      ...init,
      headers: {
        accept: 'application/json',
        ...(init.body ? { 'content-type': 'application/json' } : {}),
        ...(init.key ? { authorization: `Bearer ${init.key}` } : {}),
      },
    });

  async function heading(page: Page, text: string) {
    await page.getByRole('heading', { level: 1, name: text }).waitFor();
  }

  /** Picks an option of a React Aria select by its label. */
  async function choose(
    page: Page,
    label: string | RegExp,
    option: string,
    scope: Page | ReturnType<Page['locator']> = page,
  ) {
    await scope.getByRole('button', { name: label }).first().click();
    await page.getByRole('option', { name: option, exact: true }).click();
  }

  it('creates an API key whose shown value works against the API, and revokes it (then 401)', async () => {
    const { context, page } = await ownerPage();
    try {
      await page.goto('/settings');
      await heading(page, 'API keys');
      await page.getByLabel('Key name').fill('Zapier');
      await page
        .locator('label.checkbox')
        .filter({ hasText: /^settings$/ })
        .click();
      expect(await page.getByRole('checkbox', { name: 'settings' }).isChecked()).toBe(false);
      await page.getByRole('button', { name: 'Create API key' }).click();
      await page.getByText('you won’t see it again', { exact: false }).waitFor();
      const key = await page.locator('#secret-value').inputValue();
      expect(key).toMatch(/^lk_/);
      await checkAccessibility(page, 'API keys with a new key');
      await screenshot(page, `settings-api-keys-${kind}`);

      const entities = await call('/api/v1/entities', { key });
      expect(entities.status).toBe(200);
      expect((await call('/api/v1/settings/api-keys', { key })).status).toBe(403);
      const listed = await call('/api/v1/settings/api-keys', { key: account.apiKey });
      const zapier = ((await listed.json()) as any).api_keys.find((k: any) => k.name === 'Zapier');
      expect(zapier.permissions).not.toContain('settings');
      expect(await page.content()).toContain(key);

      await page.getByRole('button', { name: 'I have copied it' }).click();
      expect(await page.content()).not.toContain(key);
      const row = page.getByRole('row').filter({ hasText: 'Zapier' });
      await row.getByRole('button', { name: 'Revoke' }).click();
      const dialog = page.getByRole('alertdialog');
      await dialog.getByText('stops working at once').waitFor();
      await checkAccessibility(page, 'revoke dialog');
      await dialog.getByRole('button', { name: 'Revoke' }).click();
      await page.getByText('Key “Zapier” revoked.').waitFor();
      await row.waitFor({ state: 'detached' });
      expect((await call('/api/v1/entities', { key })).status).toBe(401);
      expect(pageProblems(page)).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('creates a source whose shown token and form post records, and saves its form settings', async () => {
    const { context, page } = await ownerPage(375);
    try {
      await page.goto('/settings/sources');
      await heading(page, 'Sources');
      await page.getByLabel('Source name').fill('Website');
      await page.getByRole('button', { name: 'Create source' }).click();
      await page.getByText('you won’t see it again', { exact: false }).waitFor();
      const token = await page.locator('#secret-value').inputValue();
      expect(token).toMatch(/^st_/);
      const snippet = await page.getByTestId('form-snippet').inputValue();
      expect(snippet).toContain(`action="${server.base}/api/v1/in/${token}"`);
      expect(snippet).toContain('name="fields[email]"');
      expect(snippet).toContain('name="_hp"');
      await checkAccessibility(page, 'sources with a new token (375 px)');
      await screenshot(page, `settings-sources-375-${kind}`);

      const posted = await fetch(`${server.base}/api/v1/in/${token}`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: 'entity=lead&fields%5Bemail%5D=form%40example.com&fields%5Bfirst_name%5D=Fiona',
      });
      expect(posted.status).toBe(201);
      const recordId = ((await posted.json()) as any).id;
      const record = await call(`/api/v1/records/${recordId}`, { key: account.apiKey });
      expect(((await record.json()) as any).source).toBe('Website');

      await page.getByRole('link', { name: 'Website-form settings of “Website”' }).click();
      await heading(page, 'Source “Website”');
      await page.getByLabel('Allowed origins').fill('https://www.example.com\nnot an origin');
      await page.getByLabel('Trap field').fill('website_url');
      await page.getByRole('button', { name: 'Save' }).click();
      // The service's refusal, next to the field.
      await page
        .getByText('allowed_origins', { exact: false })
        .or(page.locator('.react-aria-FieldError'))
        .first()
        .waitFor();
      await page.getByLabel('Allowed origins').fill('https://www.example.com');
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByText('Saved.').waitFor();
      const sources = await call('/api/v1/settings/sources', { key: account.apiKey });
      const website = ((await sources.json()) as any).sources.find((s: any) => s.name === 'Website');
      expect(website).toMatchObject({
        allowed_origins: ['https://www.example.com'],
        honeypot_field: 'website_url',
      });
      // Without a fresh token the snippet has a placeholder.
      expect(await page.getByTestId('form-snippet').inputValue()).toContain('/api/v1/in/YOUR_SOURCE_TOKEN');
      await checkAccessibility(page, 'source settings (375 px)');
      await screenshot(page, `settings-source-375-${kind}`);

      await page.getByRole('button', { name: 'Revoke token' }).click();
      await page.getByRole('alertdialog').getByRole('button', { name: 'Revoke token' }).click();
      await page.getByText('No active token').waitFor();
      const again = await fetch(`${server.base}/api/v1/in/${token}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ entity: 'lead', fields: { email: 'late@example.com' } }),
      });
      expect(again.status).toBe(401);
      expect(pageProblems(page)).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('adds an entity field through the screen (pipelines kept) and shows the API’s 422 next to a field', async () => {
    const { context, page } = await ownerPage();
    try {
      await page.goto('/settings/entities');
      await heading(page, 'Entities and fields');
      await checkAccessibility(page, 'entities list');
      await page.getByRole('link', { name: 'Lead', exact: true }).click();
      await heading(page, 'Entity “Lead”');
      await page.getByRole('button', { name: 'Add field' }).click();
      const added = page.locator('fieldset.field-editor').last();
      await added.getByLabel('Field key').fill('roof_type');
      await added.getByLabel('Label').fill('Roof type');
      await choose(page, /Type/, 'Choice', added);
      await page.getByRole('button', { name: 'Save entity' }).click();
      // A choice without options: the service's detail, next to the options.
      await added.locator('.react-aria-FieldError').first().waitFor();
      expect(await added.getByLabel('Options').getAttribute('aria-invalid')).toBe('true');
      await checkAccessibility(page, 'entity editor with errors');
      await added.getByLabel('Options').fill('Flat\nPitched');
      await page.getByRole('button', { name: 'Save entity' }).click();
      await page.getByText('Saved.').waitFor();
      const read = await call('/api/v1/settings/entities/lead', { key: account.apiKey });
      const entity = (await read.json()) as any;
      expect(entity.fields.at(-1)).toMatchObject({
        key: 'roof_type',
        label: 'Roof type',
        type: 'select',
        options: ['Flat', 'Pitched'],
        required: false,
      });
      expect(entity.fields.map((f: any) => f.key)).toEqual(['first_name', 'email', 'interest', 'roof_type']);
      expect(entity.pipelines).toEqual(ENTITY.pipelines);
      await screenshot(page, `settings-entity-${kind}`);

      // An option taken away that a record holds: saved, and the screen says the value is kept.
      const held = await call('/api/v1/records', {
        key: account.apiKey,
        method: 'POST',
        body: JSON.stringify({
          entity: 'lead',
          fields: { email: 'held@settings.test', interest: 'Heat pump' },
        }),
      });
      expect(held.status).toBe(201);
      const interest = page.locator('fieldset.field-editor').nth(2);
      await interest.getByLabel('Options').fill('Solar');
      await page.getByRole('button', { name: 'Save entity' }).click();
      await page
        .getByText('Records keep the values of Interest they had before the change; some may not fit it.')
        .waitFor();
      const kept = await call(`/api/v1/records/${((await held.json()) as any).id}`, { key: account.apiKey });
      expect(((await kept.json()) as any).fields.interest).toBe('Heat pump');
      expect(pageProblems(page)).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('shows the intake log with each call’s result, filtered, with the record link and a bulk call’s items', async () => {
    const created = await call('/api/v1/records', {
      method: 'POST',
      key: account.apiKey,
      body: JSON.stringify({ entity: 'lead', fields: { email: 'log@example.com', shoe: 42 } }),
    });
    const recordId = ((await created.json()) as any).id;
    await call('/api/v1/records', {
      method: 'POST',
      key: account.apiKey,
      body: JSON.stringify({ entity: 'lead', fields: { interest: 'Wind' } }),
    });
    await call('/api/v1/records/bulk', {
      method: 'POST',
      key: account.apiKey,
      body: JSON.stringify({
        records: [
          { entity: 'lead', fields: { email: 'bulk@example.com' } },
          { entity: 'nope', fields: {} },
        ],
      }),
    });
    const { context, page } = await ownerPage();
    try {
      await page.goto('/intake-log');
      await heading(page, 'Intake log');
      const createdRow = page.getByRole('row').filter({ hasText: 'shoe' });
      await createdRow.getByText('unmapped').waitFor();
      expect(await createdRow.getByRole('link', { name: 'Open record' }).getAttribute('href')).toBe(
        `/records/${recordId}`,
      );
      await page.getByText('2 entries: 1 created, 0 updated or unchanged, 1 refused').click();
      await page.getByText('unknown_entity').waitFor();
      await checkAccessibility(page, 'intake log');
      await screenshot(page, `intake-log-${kind}`);

      await choose(page, /Outcome/, 'refused');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await page.waitForURL(/outcome=refused/);
      const rows = page.getByRole('row');
      await page.getByText('validation_failed').first().waitFor();
      await expect.poll(async () => rows.count()).toBe(2);
      expect(await page.getByText('interest').count()).toBeGreaterThan(0);
      expect(pageProblems(page)).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('creates a webhook (secret shown once), sends a test to a real receiver and shows its attempts', async () => {
    const { context, page } = await ownerPage();
    try {
      await page.goto('/settings/webhooks');
      await heading(page, 'Webhooks');
      await page.getByLabel('Address (URL)').fill(receiverUrl);
      await page.getByLabel('Description').fill('CRM sync');
      await page.getByRole('button', { name: 'Create webhook' }).click();
      await heading(page, 'Webhook');
      const secret = await page.locator('#secret-value').inputValue();
      expect(secret).toMatch(/^whsec_/);
      await page.getByRole('button', { name: 'I have copied it' }).click();
      await page.getByRole('button', { name: 'Send test message' }).click();
      await page.getByText('Delivered: the receiver answered 200').waitFor();
      expect(received.some((r) => r.body.includes('webhook.test'))).toBe(true);
      const attempts = page.getByRole('grid', { name: 'Recent attempts' });
      const row = attempts.getByRole('row').filter({ hasText: 'webhook.test' });
      await row.waitFor();
      expect(await row.textContent()).toContain('200');
      expect(await row.textContent()).toContain('delivered');
      await checkAccessibility(page, 'webhook with attempts');
      await screenshot(page, `settings-webhook-${kind}`);

      const hooks = await call('/api/v1/settings/webhooks', { key: account.apiKey });
      expect(((await hooks.json()) as any).webhooks).toMatchObject([
        { url: receiverUrl, events: ['*'], description: 'CRM sync' },
      ]);
      expect(pageProblems(page)).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('creates a calendar with its weekly hours through the screen', async () => {
    const { context, page } = await ownerPage();
    try {
      await page.goto('/settings/calendars');
      await heading(page, 'Calendars');
      await page.getByRole('link', { name: 'New calendar' }).click();
      await heading(page, 'New calendar');
      await page.getByLabel('Name').fill('Consultations');
      await page.getByLabel('Time zone').fill('Europe/Berlin');
      await page.getByLabel('Monday').fill('09:00-12:00, 13:00-17:00');
      await page.getByLabel('Exceptions').fill('2030-12-24: closed');
      await page.getByRole('button', { name: 'Create calendar' }).click();
      await page.getByText('Saved.').waitFor();
      const listed = await call('/api/v1/settings/booking/calendars', { key: account.apiKey });
      const [calendar] = ((await listed.json()) as any).calendars;
      expect(calendar).toMatchObject({
        name: 'Consultations',
        time_zone: 'Europe/Berlin',
        default: true,
        exceptions: [{ date: '2030-12-24', hours: [] }],
      });
      expect(calendar.weekly.mon).toEqual([
        ['09:00', '12:00'],
        ['13:00', '17:00'],
      ]);
      expect(calendar.weekly.sat).toEqual([]);
      // The new calendar's own page, whose form edits it.
      await page.waitForURL(`**/settings/calendars/${calendar.id}`);
      await heading(page, 'Consultations');
      expect(await page.getByLabel('Monday').inputValue()).toBe('09:00-12:00, 13:00-17:00');
      await page.getByLabel('Time zone').fill('Mars/Olympus');
      await page.getByRole('button', { name: 'Save' }).click();
      await page
        .getByText('an IANA time zone name, e.g. Europe/Berlin (not an offset such as +01:00)')
        .waitFor();
      expect(await page.getByLabel('Time zone').getAttribute('aria-invalid')).toBe('true');
      await checkAccessibility(page, 'calendar form');
      await screenshot(page, `settings-calendar-${kind}`);
      expect(pageProblems(page)).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('lists users with roles, adds one, and shows the last_owner refusal', async () => {
    const { context, page } = await ownerPage(375);
    try {
      await page.goto('/settings/users');
      await heading(page, 'Users');
      await page.getByLabel('Email', { exact: true }).fill(`mia-${kind}@settings.test`);
      await page.getByLabel('Name', { exact: true }).fill('Mia Member');
      await page.getByRole('button', { name: 'Add user' }).click();
      // Invited by default, in the console's language.
      await page.getByText('Mia Member added and invited by email.').waitFor();
      const invitation = await server.t.db
        .selectFrom('outbound_messages')
        .select(['payload'])
        .where('account_id', '=', account.id)
        .where('event_type', '=', 'user.invitation')
        .executeTakeFirstOrThrow();
      expect(invitation.payload).toMatchObject({
        to: [`mia-${kind}@settings.test`],
        subject: expect.stringMatching(/^You are invited to /),
      });
      await page.getByLabel('Email', { exact: true }).fill(`nils-${kind}@settings.test`);
      await page.getByLabel('Name', { exact: true }).fill('Nils Quiet');
      await page
        .locator('label.checkbox')
        .filter({ hasText: /^Send an invitation email/ })
        .click();
      expect(await page.getByRole('checkbox', { name: /^Send an invitation email/ }).isChecked()).toBe(false);
      await page.getByRole('button', { name: 'Add user' }).click();
      await page.getByText('Nils Quiet added.').waitFor();
      const invitations = await server.t.db
        .selectFrom('outbound_messages')
        .select('id')
        .where('account_id', '=', account.id)
        .where('event_type', '=', 'user.invitation')
        .execute();
      expect(invitations).toHaveLength(1);
      await page.getByLabel('Role of Mia Member').selectOption('viewer');
      await page.getByText('Mia Member is now Viewer.').waitFor();
      await page.getByLabel('Role of Olga Owner').selectOption('admin');
      await page.getByText('the account must keep at least one owner', { exact: false }).waitFor();
      await checkAccessibility(page, 'users with the last_owner refusal (375 px)');
      await screenshot(page, `settings-users-375-${kind}`);
      const users = ((await (await call('/api/v1/settings/users', { key: account.apiKey })).json()) as any)
        .users;
      expect(users.find((u: any) => u.email === ownerEmail).role).toBe('owner');
      expect(users.find((u: any) => u.name === 'Mia Member').role).toBe('viewer');
      expect(await page.getByLabel('Role of Olga Owner').inputValue()).toBe('owner');
      expect(pageProblems(page).filter((p) => !p.includes('409'))).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('hides the settings from a member, who still reads the intake log', async () => {
    const email = `member-${kind}@settings.test`;
    await addPersonWithPassword(server.t, account, { email, name: 'Max Member', role: 'member' });
    const { context, page } = await newPage(server, { locale: 'de-DE' });
    try {
      await signInContext(context, server.base, email, PASSWORD);
      await page.goto('/intake-log');
      await heading(page, 'Eingangsprotokoll');
      expect(await page.getByRole('link', { name: 'Einstellungen' }).count()).toBe(0);
      await checkAccessibility(page, 'intake log (de, member)');
      await page.goto('/settings/api-keys');
      await page.getByText('Ihre Rolle darf die Kontoeinstellungen nicht ändern.').waitFor();
    } finally {
      await context.close();
    }
  });
});

// The console's distribution screens in real Chromium: deliveries with returns (and the
// service's refusals), partners, participations with the signing secret shown once and a test
// delivery to a real receiver on 127.0.0.1, distribution setup; checked through the API.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDispatcher, type Dispatcher } from '../../src/outbound/dispatcher.ts';
import type { TestAccount } from '../helpers/app.ts';
import { oneDatabase } from '../helpers/databases.ts';
import { distributionFactory } from '../helpers/distribution-factory.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { type Receiver, startReceiver, waitFor } from '../outbound/receiver.ts';
import { addPersonWithPassword, addUser, PASSWORD } from '../people/support.ts';
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

const silent = { info() {}, warn() {}, error() {} };

describe.skipIf(!hasChromium).each(oneDatabase('pglite'))('the console: distribution on %s', (kind) => {
  let server: ConsoleServer;
  let dispatcher: Dispatcher;
  let account: TestAccount;
  const receivers: Receiver[] = [];
  const users = { admin: '', member: '', viewer: '' };

  const call = async (method: 'GET' | 'POST' | 'PUT' | 'PATCH', url: string, body?: unknown) => {
    const response = await server.t.request({ method, url, key: account.apiKey, body });
    return { status: response.statusCode, body: response.json() as any };
  };

  beforeAll(async () => {
    server = await startConsoleServer(kind);
    dispatcher = createDispatcher(server.t.services.outbound, silent, { idlePollMs: 20 });
    dispatcher.start();
    account = await accountWithLeads(server.t, { modules: ['distribution'] });
    await addUser(server.t, account, { email: `owner-${kind}@dist.test`, name: 'Olga Owner' });
    for (const role of ['admin', 'member', 'viewer'] as const) {
      const email = `${role}-${kind}@dist.test`;
      await addPersonWithPassword(server.t, account, { email, name: `${role} person`, role });
      users[role] = email;
    }
  });
  afterAll(async () => {
    await dispatcher?.stop(1_000);
    await server?.close();
    for (const receiver of receivers) await receiver.close();
  });

  async function receiver() {
    const made = await startReceiver();
    receivers.push(made);
    return made;
  }

  async function open(
    role: keyof typeof users,
    path: string,
    options: { width?: number; locale?: string } = {},
  ) {
    const { context, page } = await newPage(server, options);
    await signInContext(context, server.base, users[role], PASSWORD);
    await page.goto(path);
    return { context, page };
  }

  /** A lead setup delivering over a webhook to a real receiver: two delivered deliveries. */
  async function deliveredTwice() {
    const factory = distributionFactory(server.t, account);
    const hook = await receiver();
    const distributionId = await factory.distribution('lead', { returnDeadlineDays: 14 });
    const partnerId = await factory.partner({ name: `Receiver ${kind}` });
    const participation = await factory.participation(distributionId, { partnerId, address: hook.url });
    hook.verifyWith(participation.secret!);
    await factory.rule(distributionId, { participationIds: [participation.id] });
    await factory.returnReason('Wrong phone number');
    const ids: string[] = [];
    for (const email of ['first@lead.test', 'second@lead.test']) {
      const record = await call('POST', '/api/v1/records', { entity: 'lead', fields: { email } });
      const started = await call('POST', '/api/v1/distribution/distributions', { record_id: record.body.id });
      expect(started.body.status).toBe('distributed');
      ids.push(record.body.id);
    }
    const deliveries = await waitFor(async () => {
      const list = (await call('GET', `/api/v1/distribution/deliveries?partner_id=${partnerId}`)).body
        .deliveries;
      return list.length === 2 && list.every((d: { status: string }) => d.status === 'delivered') && list;
    });
    return { partnerId, recordIds: ids, deliveries: deliveries as { id: string; record_id: string }[] };
  }

  const deliveryStatus = async (id: string) =>
    (await call('GET', '/api/v1/distribution/deliveries')).body.deliveries.find(
      (d: { id: string }) => d.id === id,
    )?.status;

  async function returnRow(page: Page, recordId: string) {
    const link = page.getByRole('link', { name: `Record ${recordId.slice(-8)}` });
    return page.getByRole('row').filter({ has: link });
  }

  it('returns a delivery with a reason as a member, and shows the refusal once the deadline is 0', async () => {
    const setup = await deliveredTwice();
    const [newest, older] = setup.deliveries as [
      { id: string; record_id: string },
      { id: string; record_id: string },
    ];
    const { context, page } = await open('member', '/deliveries');
    try {
      await page.getByRole('heading', { level: 1, name: 'Deliveries' }).waitFor();
      const row = await returnRow(page, newest.record_id);
      await row.getByRole('button', { name: /^Return the delivery/ }).click();
      await page.getByRole('heading', { name: `Return the delivery to Receiver ${kind}` }).waitFor();
      await checkAccessibility(page, 'deliveries with the return form');
      await page.getByRole('button', { name: /Reason/ }).click();
      await page.getByRole('option', { name: 'Wrong phone number' }).click();
      await page.getByLabel('Note (optional)').fill('number does not exist');
      await page.getByRole('button', { name: 'Return delivery' }).click();
      await page.getByText('Delivery returned.').waitFor();
      expect(await deliveryStatus(newest.id)).toBe('returned');
      // The row now says so, and offers no second return.
      await (await returnRow(page, newest.record_id)).getByText('returned').waitFor();
      expect(
        await (await returnRow(page, newest.record_id)).getByRole('button', { name: /^Return/ }).count(),
      ).toBe(0);
      await screenshot(page, `deliveries-returned-${kind}`);

      // The deadline becomes 0: the service refuses, and the screen says why.
      expect(
        (await call('PUT', '/api/v1/settings/distributions/lead', { return_deadline_days: 0 })).status,
      ).toBe(200);
      await (await returnRow(page, older.record_id))
        .getByRole('button', { name: /^Return the delivery/ })
        .click();
      await page.getByRole('button', { name: 'Return delivery' }).click();
      const alert = page.getByRole('alert').filter({ hasText: 'deadline' });
      await alert.waitFor();
      expect(await alert.textContent()).toBe(
        'Not returned: the return deadline of this distribution has passed.',
      );
      expect(await deliveryStatus(older.id)).toBe('delivered');
      await screenshot(page, `deliveries-refused-${kind}`);

      // Filters go to the API: only returned deliveries.
      await page.getByRole('button', { name: /Status/ }).click();
      await page.getByRole('option', { name: 'returned' }).click();
      await page.waitForURL(/status=returned/);
      await expect.poll(() => page.getByRole('row').count()).toBe(2);
      expect(pageProblems(page)).toEqual([]);
    } finally {
      await context.close();
    }
    await call('PUT', '/api/v1/settings/distributions/lead', { return_deadline_days: 14 });
  });

  it("shows a delivery's attempts, as the receiver answered them, to every role", async () => {
    // The delivery the test before could not return: delivered over a webhook to a real receiver.
    const [newest] = (await call('GET', '/api/v1/distribution/deliveries?status=delivered')).body
      .deliveries as [{ id: string; record_id: string }];
    const { context, page } = await open('viewer', '/deliveries');
    try {
      await page.getByRole('heading', { level: 1, name: 'Deliveries' }).waitFor();
      const row = await returnRow(page, newest.record_id);
      await row.getByRole('button', { name: /^Attempts of the delivery to / }).click();
      const panel = page.getByRole('region', { name: /^Attempts of the delivery to Receiver / });
      await panel.waitFor();
      // The panel's title takes the focus, so that a keyboard user lands in it.
      expect(await page.evaluate('document.activeElement.id')).toBe('delivery-attempts-panel');
      const attempt = panel.getByRole('grid', { name: 'Recent attempts' }).getByRole('row').filter({
        hasText: 'delivered',
      });
      await attempt.waitFor();
      expect(await attempt.textContent()).toContain('200');
      expect(await attempt.textContent()).toContain('record.delivered');
      const listed = (await call('GET', `/api/v1/distribution/deliveries/${newest.id}/attempts`)).body
        .attempts;
      expect(listed).toHaveLength(1);
      await checkAccessibility(page, 'deliveries with a delivery’s attempts');
      await page.getByRole('button', { name: 'Close' }).click();
      await expect.poll(() => panel.count()).toBe(0);
      expect(pageProblems(page)).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('offers a viewer no return, at 375 px and in German, and hides the setup from non-admins', async () => {
    const list = (await call('GET', '/api/v1/distribution/deliveries?status=delivered')).body.deliveries;
    expect(list.length).toBeGreaterThan(0);
    const { context, page } = await open('viewer', '/deliveries', { width: 375, locale: 'de-DE' });
    try {
      await page.getByRole('heading', { level: 1, name: 'Lieferungen' }).waitFor();
      await page.getByRole('gridcell', { name: 'zugestellt' }).first().waitFor();
      expect(await page.getByRole('button', { name: /zurückgeben/ }).count()).toBe(0);
      await checkAccessibility(page, 'deliveries (viewer, de, 375 px)');
      await screenshot(page, `deliveries-viewer-de-375-${kind}`);
      // The setup is the admins': no entry in the menu.
      await page.getByRole('button', { name: 'Menü' }).click();
      expect(await page.getByRole('link', { name: 'Verteilung einrichten' }).count()).toBe(0);
      expect(await page.getByRole('link', { name: 'Partner' }).count()).toBe(1);
      expect(pageProblems(page)).toEqual([]);
    } finally {
      await context.close();
    }
    // The service agrees: a viewer's return is refused.
    const viewer = await newPage(server);
    try {
      const session = await signInContext(viewer.context, server.base, users.viewer, PASSWORD);
      const refused = await fetch(`${server.base}/api/v1/distribution/deliveries/${list[0].id}/return`, {
        method: 'POST',
        headers: { cookie: session.cookie, 'x-csrf-token': session.csrf, 'content-type': 'application/json' },
        body: '{}',
      });
      expect(refused.status).toBe(403);
    } finally {
      await viewer.context.close();
    }
  });

  it('creates a partner (the API refusing a country first), a participation with its secret shown once, and sends a test delivery', async () => {
    const hook = await receiver();
    const name = `Acme ${kind}`;
    const { context, page } = await open('admin', '/partners');
    try {
      await page.getByRole('heading', { level: 1, name: 'Partners' }).waitFor();
      await checkAccessibility(page, 'partners list');
      await page.getByRole('link', { name: 'New partner' }).click();
      await page.getByRole('heading', { level: 1, name: 'New partner' }).waitFor();
      await page.getByLabel(/^Name/).fill(name);
      await page
        .getByLabel(/^Email/)
        .first()
        .fill('leads@acme.test');
      await page
        .getByLabel(/^Country/)
        .first()
        .fill('Atlantis');
      await page.getByRole('button', { name: 'Create partner' }).click();
      // The service's 422 detail stands at the field.
      const country = page.getByLabel(/^Country/).first();
      await expect.poll(() => country.getAttribute('aria-invalid')).toBe('true');
      await checkAccessibility(page, 'partner form with an error');
      await screenshot(page, `partner-form-error-${kind}`);
      await country.fill('Germany');
      await page.getByRole('button', { name: 'Create partner' }).click();
      await page.getByRole('heading', { level: 1, name }).waitFor();
      const partnerId = new URL(page.url()).pathname.split('/').pop()!;
      const created = await call('GET', `/api/v1/distribution/partners/${partnerId}`);
      expect(created.body).toMatchObject({ name, email: 'leads@acme.test', country: 'DE' });
      // What invoices still miss is shown.
      expect(created.body.gaps).toEqual(['street', 'postal_code', 'city']);
      expect(await page.getByTestId('gaps').textContent()).toContain('postal code');
      await checkAccessibility(page, 'partner page');

      // A participation through the setup page: the secret is shown once.
      await page.goto('/settings/distribution');
      await page.getByRole('heading', { level: 1, name: 'Distribution setup' }).waitFor();
      await page.getByRole('button', { name: 'Add participation' }).click();
      const form = page.getByRole('form', { name: 'Add participation' });
      await form.getByRole('button', { name: /Partner/ }).click();
      await page.getByRole('option', { name }).click();
      await form.getByLabel(/^Address/).fill(hook.url);
      await form.getByLabel(/^Price per delivery/).fill('12,50');
      await form.getByLabel(/^Cap per day/).fill('many');
      await form.getByRole('button', { name: 'Add participation' }).click();
      // A cap that is no number: the service's 422 at the field.
      await expect.poll(() => form.getByLabel(/^Cap per day/).getAttribute('aria-invalid')).toBe('true');
      await form.getByLabel(/^Cap per day/).fill('5');
      await form.getByRole('button', { name: 'Add participation' }).click();
      const secret = (await page.getByTestId('secret').textContent())!;
      expect(secret).toMatch(/^whsec_/);
      await checkAccessibility(page, 'distribution setup with a new secret');
      await screenshot(page, `distribution-setup-${kind}`);
      const setup = (await call('GET', '/api/v1/settings/distributions/lead')).body;
      const participation = setup.participations.find(
        (p: { partner_id: string }) => p.partner_id === partnerId,
      );
      expect(participation).toMatchObject({
        channel: 'webhook',
        address: hook.url,
        price_cents: 1250,
        caps: { day: 5 },
      });
      expect(setup.participations.every((p: object) => !('secret' in p))).toBe(true);
      hook.verifyWith(secret);
      await page.getByRole('button', { name: 'Hide' }).click();
      expect(await page.getByTestId('secret').count()).toBe(0);

      // The partner's page: pause, resume and a test delivery to the receiver.
      await page.goto(`/partners/${partnerId}`);
      await page.getByRole('button', { name: `Pause the participation of ${name} in lead` }).click();
      await page.getByText('Participation paused.').waitFor();
      expect(
        (await call('GET', '/api/v1/settings/distributions/lead')).body.participations.find(
          (p: { id: string }) => p.id === participation.id,
        ).paused,
      ).toBe(true);
      await page.getByRole('button', { name: `Resume the participation of ${name} in lead` }).click();
      await page.getByText('Participation resumed.').waitFor();
      hook.answerNext({ status: 202, body: 'thanks' });
      await page.getByRole('button', { name: `Send test to ${hook.url}` }).click();
      await page
        .getByRole('heading', { name: 'Test delivery: The receiver accepted the test delivery.' })
        .waitFor();
      expect(await page.locator('.test-result').textContent()).toContain('thanks');
      expect(hook.received).toHaveLength(1);
      expect(hook.invalid).toHaveLength(0);
      expect(hook.received[0]!.json.data.record.entity).toBe('lead');
      await checkAccessibility(page, 'partner page with a test result');
      await screenshot(page, `partner-test-delivery-${kind}`);

      // A receiver that refuses: the result says so.
      hook.answerNext({ status: 500, body: 'down for maintenance' });
      await page.getByRole('button', { name: `Send test to ${hook.url}` }).click();
      await page.getByRole('heading', { name: 'Test delivery: The test delivery failed.' }).waitFor();
      expect(await page.locator('.test-result').textContent()).toContain('500');
      // Nothing was recorded as a delivery.
      expect(
        (await call('GET', `/api/v1/distribution/deliveries?partner_id=${partnerId}`)).body.deliveries,
      ).toEqual([]);
      expect(pageProblems(page)).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('saves rules and return reasons as an admin, showing the 422 of a rule at its field', async () => {
    const { context, page } = await open('admin', '/settings/distribution', { width: 375 });
    try {
      await page.getByRole('heading', { level: 1, name: 'Distribution setup' }).waitFor();
      await page.getByRole('button', { name: 'Add rule' }).click();
      const rules = page.getByRole('form', { name: 'Rules' });
      const last = rules
        .getByRole('group')
        .filter({ hasText: /^Rule \d+/ })
        .last();
      await last.getByLabel(/^Name/).fill('Rule');
      await rules.getByRole('button', { name: 'Save rules' }).click();
      // The name repeats the existing rule's: the service's 422 at the field.
      await expect.poll(() => last.getByLabel(/^Name/).getAttribute('aria-invalid')).toBe('true');
      await last.getByLabel(/^Name/).fill('Berlin');
      await last.getByRole('button', { name: 'Add condition' }).click();
      await last.getByLabel(/^Value/).fill('Berlin');
      await rules.getByRole('button', { name: 'Save rules' }).click();
      await page.getByText('Rules saved.').waitFor();
      const saved = (await call('GET', '/api/v1/settings/distributions/lead')).body.rules;
      expect(saved.map((r: { name: string }) => r.name)).toEqual(['Rule', 'Berlin']);
      expect(saved[1].filter).toEqual([{ field: expect.any(String), op: 'equals', value: 'Berlin' }]);

      await page.getByLabel('New return reason').fill('Duplicate');
      await page.getByRole('button', { name: 'Add reason' }).click();
      await page.getByText('Return reason added.').waitFor();
      await page.getByLabel('New return reason').fill('duplicate');
      await page.getByRole('button', { name: 'Add reason' }).click();
      await expect.poll(() => page.getByLabel('New return reason').getAttribute('aria-invalid')).toBe('true');
      const reasons = (await call('GET', '/api/v1/distribution/return-reasons')).body.return_reasons;
      expect(reasons.map((r: { name: string }) => r.name)).toContain('Duplicate');
      await checkAccessibility(page, 'distribution setup (375 px)');
      await screenshot(page, `distribution-setup-375-${kind}`);
      expect(pageProblems(page)).toEqual([]);
    } finally {
      await context.close();
    }
  });
});

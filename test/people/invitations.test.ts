import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestAccount, TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { waitFor } from '../outbound/receiver.ts';
import { startAppWithMail } from './mail-support.ts';
import { cookieValue, openLink } from './support.ts';

const PUBLIC_URL = 'http://127.0.0.1:3998';
const DAY_MS = 86_400_000;

/** `POST /api/v1/settings/users` with `invite`: the person gets a sign-in link by email, valid 7 days. */
describe.each(TEST_DATABASES)('invitations of people added on %s', (kind) => {
  let app: Awaited<ReturnType<typeof startAppWithMail>>;
  let t: TestApp;
  let account: TestAccount;
  beforeAll(async () => {
    app = await startAppWithMail(kind, PUBLIC_URL);
    t = app.t;
    account = await t.createAccount({ name: 'Solar GmbH' });
    // The account's first user is its owner; the people invited below are the next.
    await add({ email: 'owner@invite.test', name: 'Olga' });
  });
  afterAll(async () => {
    await app?.close();
  });

  function add(body: object, key = account.apiKey) {
    return t.request({ method: 'POST', url: '/api/v1/settings/users', key, body });
  }
  const mailsTo = (address: string) => app.mailsTo(address);
  const linkIn = (text: string | undefined) => app.linkIn(text);
  const invitationsOf = (userId: string) =>
    t.db
      .selectFrom('outbound_messages')
      .select('id')
      .where('account_id', '=', account.id)
      .where('event_type', '=', 'user.invitation')
      .where('ref', '=', userId)
      .execute();

  describe('happy path', () => {
    it('emails the person a link that signs in once, valid 7 days, and answers until when', async () => {
      const before = Date.now();
      const added = await add({ email: 'mia@invite.test', name: 'Mia', role: 'member', invite: true });
      expect(added.statusCode, added.body).toBe(201);
      const user = added.json();
      expect(user).toMatchObject({ email: 'mia@invite.test', name: 'Mia', role: 'member' });
      const until = Date.parse(user.invited_until);
      expect(until).toBeGreaterThanOrEqual(before + 7 * DAY_MS - 1_000);
      expect(until).toBeLessThanOrEqual(Date.now() + 7 * DAY_MS + 1_000);

      await waitFor(() => mailsTo('mia@invite.test').length >= 1, 10_000, 'the invitation');
      const mail = mailsTo('mia@invite.test')[0]!;
      expect(mail.subject).toBe('You are invited to Solar GmbH on Leadline');
      expect(mail.text).toContain('Hello Mia');
      expect(mail.text).toContain('within 7 days');
      const token = linkIn(mail.text);

      const opened = await openLink(t, token);
      expect(opened.statusCode).toBe(303);
      const session = await t.request({
        method: 'GET',
        url: '/api/v1/session',
        headers: { cookie: `leads_session=${cookieValue(opened.headers['set-cookie'])}` },
      });
      expect(session.json().user).toMatchObject({ id: user.id, role: 'member', has_password: false });
      expect((await openLink(t, token)).statusCode).toBe(410);
    });

    it('writes the invitation in German when asked', async () => {
      const added = await add({ email: 'jan@invite.test', name: 'Jan', invite: true, language: 'de' });
      expect(added.statusCode, added.body).toBe(201);
      await waitFor(() => mailsTo('jan@invite.test').length >= 1, 10_000, 'the invitation');
      const mail = mailsTo('jan@invite.test')[0]!;
      expect(mail.subject).toBe('Einladung zu Solar GmbH in Leadline');
      expect(mail.text).toContain('innerhalb von 7 Tagen');
      // The link sets a password too, as a reset link does.
      const set = await t.request({
        method: 'POST',
        url: '/api/v1/session/password',
        body: { token: linkIn(mail.text), password: 'a long enough password' },
      });
      expect(set.statusCode, set.body).toBe(204);
    });

    it('sends nothing without invite, as before', async () => {
      const added = await add({ email: 'quiet@invite.test', name: 'Quiet' });
      expect(added.statusCode).toBe(201);
      expect(added.json()).not.toHaveProperty('invited_until');
      expect(await invitationsOf(added.json().id)).toEqual([]);
    });
  });

  describe('errors', () => {
    it('refuses a language without invite, and an unknown one, adding no one', async () => {
      const alone = await add({ email: 'lang@invite.test', name: 'Lang', language: 'de' });
      expect(alone.statusCode).toBe(422);
      expect(alone.json().details).toEqual([
        expect.objectContaining({ key: 'language', reason: 'not_allowed' }),
      ]);
      const unknown = await add({ email: 'lang@invite.test', name: 'Lang', invite: true, language: 'fr' });
      expect(unknown.statusCode).toBe(422);
      const listed = await t.request({ method: 'GET', url: '/api/v1/settings/users', key: account.apiKey });
      expect(listed.json().users.map((u: { email: string }) => u.email)).not.toContain('lang@invite.test');
    });

    it('sends no invitation when the creation is refused (the email is taken)', async () => {
      const first = await add({ email: 'twice@invite.test', name: 'Twice', invite: true });
      expect(first.statusCode).toBe(201);
      const again = await add({ email: 'twice@invite.test', name: 'Twice again', invite: true });
      expect(again.statusCode).toBe(409);
      const written = await t.db
        .selectFrom('outbound_messages')
        .select('id')
        .where('account_id', '=', account.id)
        .where('event_type', '=', 'user.invitation')
        .where('payload', '@>', JSON.stringify({ to: ['twice@invite.test'] }) as never)
        .execute();
      expect(written).toHaveLength(1);
    });
  });

  describe('security', () => {
    it('is the owner’s, as adding users is: a key without manages_users is refused and nothing is sent', async () => {
      const made = await t.request({
        method: 'POST',
        url: '/api/v1/settings/api-keys',
        key: account.apiKey,
        body: { name: 'settings only', permissions: ['settings'] },
      });
      expect(made.statusCode, made.body).toBe(201);
      const refused = await add(
        { email: 'sneaky@invite.test', name: 'Sneaky', invite: true },
        made.json().key,
      );
      expect(refused.statusCode).toBe(403);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(mailsTo('sneaky@invite.test')).toEqual([]);
    });
  });
});

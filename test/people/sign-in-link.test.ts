import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { waitFor } from '../outbound/receiver.ts';
import type { SmtpServer } from '../outbound/smtp-server.ts';
import { startAppWithMail } from './mail-support.ts';
import { addUser, cookieValue, openLink } from './support.ts';

const PUBLIC_URL = 'http://127.0.0.1:3999';

describe.each(TEST_DATABASES)('sign-in links by email on %s', (kind) => {
  let app: Awaited<ReturnType<typeof startAppWithMail>>;
  let smtp: SmtpServer;
  let t: TestApp;
  beforeAll(async () => {
    app = await startAppWithMail(kind, PUBLIC_URL);
    ({ t, smtp } = app);
  });
  afterAll(async () => {
    await app?.close();
  });

  const mailsTo = (address: string) => app.mailsTo(address);
  const linkIn = (text: string | undefined) => app.linkIn(text);

  describe('happy path', () => {
    it('emails a link that signs in once in the browser, and one that signs in by POST', async () => {
      const account = await t.createAccount({ name: 'Solar GmbH' });
      const userId = await addUser(t, account, { email: 'mia@people.test', name: 'Mia' });
      const asked = await t.request({
        method: 'POST',
        url: '/api/v1/session/link',
        body: { email: 'MIA@people.test' },
      });
      expect(asked.statusCode).toBe(202);
      await waitFor(() => mailsTo('mia@people.test').length >= 1, 10_000, 'the sign-in email');
      const mail = mailsTo('mia@people.test')[0]!;
      expect(mail.subject).toBe('Your sign-in link for Solar GmbH');
      expect(mail.text).toContain('Hello Mia');
      expect(mail.text).toContain('within 15 minutes');
      const token = linkIn(mail.text);

      const opened = await openLink(t, token);
      expect(opened.statusCode).toBe(303);
      expect(opened.headers.location).toBe('/');
      const cookie = cookieValue(opened.headers['set-cookie']);
      const session = await t.request({
        method: 'GET',
        url: '/api/v1/session',
        headers: { cookie: `leads_session=${cookie}` },
      });
      expect(session.json().user).toMatchObject({ id: userId, account_id: account.id, role: 'owner' });
      const again = await openLink(t, token);
      expect(again.statusCode).toBe(410);

      await t.request({
        method: 'POST',
        url: '/api/v1/session/link',
        headers: { 'accept-language': 'de' },
        body: { email: 'mia@people.test' },
      });
      await waitFor(() => mailsTo('mia@people.test').length >= 2, 10_000, 'the second email');
      const second = mailsTo('mia@people.test')[1]!;
      expect(second.subject).toBe('Ihr Anmeldelink für Solar GmbH');
      const posted = await t.request({
        method: 'POST',
        url: '/api/v1/session',
        body: { token: linkIn(second.text) },
      });
      expect(posted.statusCode).toBe(200);
      expect(posted.json().user.id).toBe(userId);
    });
  });

  describe('errors', () => {
    it('answers 202 for an unknown address and sends nothing', async () => {
      const before = smtp.received.length;
      const asked = await t.request({
        method: 'POST',
        url: '/api/v1/session/link',
        body: { email: 'stranger@people.test' },
      });
      expect(asked.statusCode).toBe(202);
      // A known address asked for after it is sent: the unknown one would have been sent first.
      const account = await t.createAccount();
      await addUser(t, account, { email: 'known-after@people.test' });
      await t.request({
        method: 'POST',
        url: '/api/v1/session/link',
        body: { email: 'known-after@people.test' },
      });
      await waitFor(
        () => mailsTo('known-after@people.test').length >= 1,
        10_000,
        'the known address’s email',
      );
      expect(smtp.received.length - before).toBe(1);
      expect(mailsTo('stranger@people.test')).toHaveLength(0);
    });
  });

  describe('security', () => {
    it('sends at most 5 links to one address in 15 minutes, answering 202 all the same', async () => {
      const account = await t.createAccount();
      await addUser(t, account, { email: 'flooded@people.test' });
      for (let i = 0; i < 8; i++) {
        const asked = await t.request({
          method: 'POST',
          url: '/api/v1/session/link',
          body: { email: 'flooded@people.test' },
          remoteAddress: `10.9.0.${i + 1}`,
        });
        expect(asked.statusCode).toBe(202);
      }
      await waitFor(() => mailsTo('flooded@people.test').length >= 5, 10_000, 'five emails');
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(mailsTo('flooded@people.test')).toHaveLength(5);
    });
  });
});

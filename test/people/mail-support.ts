import type { DatabaseKind } from '../../src/db/client.ts';
import { createDispatcher, type Dispatcher } from '../../src/outbound/dispatcher.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { type SmtpServer, startSmtpServer } from '../outbound/smtp-server.ts';

const silent = { info() {}, warn() {}, error() {} };

/**
 * The app with a real SMTP server in this process and a dispatcher sending its email, so that
 * sign-in and invitation emails arrive as they would for a user; links point at `publicUrl`.
 */
export async function startAppWithMail(kind: DatabaseKind, publicUrl: string) {
  const smtp: SmtpServer = await startSmtpServer();
  const t: TestApp = await startTestApp(kind, {
    publicUrl: () => publicUrl,
    outbound: { smtpUrl: smtp.url, mailFrom: 'Leadline <leads@leads.test>', retryScheduleMs: [50] },
  });
  const dispatcher: Dispatcher = createDispatcher(t.services.outbound, silent, { idlePollMs: 20 });
  dispatcher.start();
  const escaped = publicUrl.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  return {
    t,
    smtp,
    /** The emails received for an address, oldest first. */
    mailsTo: (address: string) =>
      smtp.received.filter((mail) => (mail.to as { text: string } | undefined)?.text.includes(address)),
    /** The sign-in token of the link in an email's text. */
    linkIn(text: string | undefined): string {
      const match = new RegExp(`${escaped}/sign-in/(sl_[0-9A-Za-z]+)`).exec(text ?? '');
      if (!match) throw new Error(`no link in ${text}`);
      return match[1]!;
    },
    async close() {
      await dispatcher.stop(1_000);
      await t.close();
      await smtp.close();
    },
  };
}

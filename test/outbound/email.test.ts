import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runInBackground } from '../../src/jobs/background.ts';
import { createDispatcher, type Dispatcher } from '../../src/outbound/dispatcher.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { waitFor } from './receiver.ts';
import { startSmtpServer } from './smtp-server.ts';

const silent = { info() {}, warn() {}, error() {} };
const ICS = 'BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Leadline//Test//EN\r\nEND:VCALENDAR\r\n';

describe.each(TEST_DATABASES)('outbound email on %s', (kind) => {
  let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
  let t: TestApp;
  let dispatcher: Dispatcher;
  beforeAll(async () => {
    smtp = await startSmtpServer();
    t = await startTestApp(kind, {
      outbound: { smtpUrl: smtp.url, mailFrom: 'Leadline <noreply@leads.test>', retryScheduleMs: [50, 50] },
    });
    dispatcher = createDispatcher(t.services.outbound, silent, { idlePollMs: 20 });
    dispatcher.start();
  });
  afterAll(async () => {
    await dispatcher?.stop(1_000);
    await t?.close();
    await smtp?.close();
  });

  const messageOf = (id: string) =>
    t.db
      .selectFrom('outbound_messages')
      .select(['status', 'attempts', 'last_error'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();

  describe('happy path', () => {
    it('sends text, HTML and an .ics attachment through SMTP after the commit', async () => {
      const account = await t.createAccount();
      const id = await t.db.transaction().execute((tx) =>
        t.services.outbound.enqueueEmail(tx, account.id, {
          to: ['person@leads.test'],
          subject: 'Your appointment',
          text: 'See you on Monday.',
          html: '<p>See you on <b>Monday</b>.</p>',
          attachments: [
            {
              filename: 'invite.ics',
              contentType: 'text/calendar',
              contentBase64: Buffer.from(ICS).toString('base64'),
            },
          ],
        }),
      );
      await waitFor(() => smtp.received.length >= 1, 10_000, 'the email');
      const mail = smtp.received[0]!;
      expect(mail.subject).toBe('Your appointment');
      expect(mail.from?.text).toContain('noreply@leads.test');
      expect(mail.text?.trim()).toBe('See you on Monday.');
      expect(mail.html).toContain('<b>Monday</b>');
      expect(mail.messageId).toBe(`<${id}@leads.test>`);
      expect(mail.attachments).toHaveLength(1);
      expect(mail.attachments[0]).toMatchObject({ filename: 'invite.ics', contentType: 'text/calendar' });
      expect(mail.attachments[0]!.content.toString()).toBe(ICS);
      await waitFor(async () => (await messageOf(id)).status === 'delivered', 5_000, 'delivered');
      // A successful attempt is kept on the message row, not as an attempt row.
      const attempts = await t.db
        .selectFrom('outbound_attempts')
        .selectAll()
        .where('message_id', '=', id)
        .execute();
      expect(attempts).toEqual([]);
      const kept = await t.db
        .selectFrom('outbound_messages')
        .select(['status_code', 'reply', 'duration_ms', 'finished_at'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      expect(kept.status_code).toBe(250);
      expect(kept.reply).toMatch(/^250/);
      expect(kept.duration_ms).toBeGreaterThanOrEqual(0);
      expect(kept.finished_at).toBeInstanceOf(Date);
    });

    /**
     * Six emails written one after another (`gapMs` apart) by a node whose dispatcher has these
     * options: when the third arrived and how long the writing took, from the first write.
     */
    async function sendSixWhileWriting(
      options: Parameters<typeof createDispatcher>[2],
      gapMs = 0,
      writer: 'request' | 'job' = 'request',
    ) {
      const paced = await startTestApp(kind, {
        outbound: { smtpUrl: smtp.url, mailFrom: 'Leadline <noreply@leads.test>' },
      });
      // Claims follow the writes' wake-ups, not an idle look: a look decided before the writes
      // began (nothing to pace yet) claimed whatever they had written by the time its statement
      // ran, three emails 129 ms after the first write on a loaded machine.
      const local = createDispatcher(paced.services.outbound, silent, { idlePollMs: 60_000, ...options });
      local.start();
      try {
        const account = await paced.createAccount();
        const before = smtp.received.length;
        const subject = `Paced ${account.id}`;
        const writtenAt = Date.now();
        let thirdAfterMs: number | undefined;
        // Only this call's emails count: a late email of an earlier test on the shared server
        // would otherwise pass for one of these (a third "sent" 179 ms after the writes began).
        const sent = () => smtp.received.slice(before).filter((mail) => mail.subject === subject).length;
        const third = waitFor(() => sent() >= 3, 10_000, 'the third email').then(() => {
          thirdAfterMs = Date.now() - writtenAt;
        });
        for (let i = 0; i < 6; i++) {
          if (i > 0 && gapMs > 0) await new Promise((resolve) => setTimeout(resolve, gapMs));
          const write = () =>
            paced.services.outbound.enqueueEmail(paced.db, account.id, {
              to: ['person@leads.test'],
              subject,
              text: String(i),
            });
          await (writer === 'job' ? runInBackground(write) : write());
        }
        const writingMs = Date.now() - writtenAt;
        await third;
        await waitFor(() => sent() >= 6, 10_000, 'all six emails');
        expect(sent()).toBe(6);
        return { thirdAfterMs: thirdAfterMs!, writingMs };
      } finally {
        await local.stop(1_000);
        await paced.close();
      }
    }

    it('while the CPUs are contended, claims few messages while this node writes, and sends the rest once the writes stop', async () => {
      // Two claims of two while the writes go on: the third message waits for the second claim.
      const { thirdAfterMs } = await sendSixWhileWriting({
        cpuPressure: { current: () => 0.9 },
        contendedClaim: 2,
        busyIntervalMs: 400,
      });
      expect(thirdAfterMs).toBeGreaterThanOrEqual(400);
    });

    it("paces its claims while this node writes and its event loop is saturated, whatever the machine's CPU pressure", async () => {
      const { thirdAfterMs } = await sendSixWhileWriting({
        cpuPressure: { current: () => 0 },
        eventLoop: { current: () => 0.95 },
        contendedClaim: 2,
        busyIntervalMs: 400,
      });
      expect(thirdAfterMs).toBeGreaterThanOrEqual(400);
    });

    it('with spare CPU, does not pace its claims while this node writes', async () => {
      const { thirdAfterMs, writingMs } = await sendSixWhileWriting(
        {
          cpuPressure: { current: () => 0.05 },
          eventLoop: { current: () => 0.1 },
          contendedClaim: 2,
          busyIntervalMs: 5_000,
        },
        150,
      );
      // Paced, the third message would wait for the writes to stop (and 500 ms more); unpaced it
      // goes out while they go on.
      expect(thirdAfterMs).toBeLessThan(writingMs);
    });

    it("does not pace its claims for the messages of the workers' own jobs, even while the CPUs are contended", async () => {
      const { thirdAfterMs, writingMs } = await sendSixWhileWriting(
        {
          cpuPressure: { current: () => 0.9 },
          eventLoop: { current: () => 1 },
          contendedClaim: 2,
          busyIntervalMs: 5_000,
        },
        150,
        'job',
      );
      expect(thirdAfterMs).toBeLessThan(writingMs);
    });

    it('paces its claims to a fixed rate while this node writes messages where there is no CPU pressure gauge', async () => {
      const { thirdAfterMs } = await sendSixWhileWriting({
        cpuPressure: null,
        busyClaim: 2,
        busyIntervalMs: 400,
      });
      expect(thirdAfterMs).toBeGreaterThanOrEqual(400);
    });
  });

  describe('errors', () => {
    it('fails a permanent 5xx answer at once, without retries', async () => {
      const account = await t.createAccount();
      const id = await t.services.outbound.enqueueEmail(t.db, account.id, {
        to: ['refused@leads.test'],
        subject: 'Nobody home',
        text: 'x',
      });
      const message = await waitFor(async () => {
        const row = await messageOf(id);
        return row.status === 'failed' ? row : null;
      });
      expect(message).toEqual({ status: 'failed', attempts: 1, last_error: 'smtp_550' });
      const attempts = await t.db
        .selectFrom('outbound_attempts')
        .selectAll()
        .where('message_id', '=', id)
        .execute();
      expect(attempts).toHaveLength(1);
      expect(attempts[0]!.reply).toContain('No such mailbox');
    });

    it('retries when the SMTP server cannot be reached', async () => {
      const down = await startTestApp(kind, {
        outbound: { smtpUrl: 'smtp://user:secret@127.0.0.1:1', retryScheduleMs: [30, 30] },
      });
      const local = createDispatcher(down.services.outbound, silent, { idlePollMs: 20 });
      local.start();
      try {
        const account = await down.createAccount();
        const id = await down.services.outbound.enqueueEmail(down.db, account.id, {
          to: ['a@leads.test'],
          subject: 's',
          text: 't',
        });
        const message = await waitFor(async () => {
          const row = await down.db
            .selectFrom('outbound_messages')
            .select(['status', 'attempts', 'last_error'])
            .where('id', '=', id)
            .executeTakeFirstOrThrow();
          return row.status === 'failed' ? row : null;
        });
        expect(message).toEqual({ status: 'failed', attempts: 3, last_error: 'network_error' });
      } finally {
        await local.stop(1_000);
        await down.close();
      }
    });
  });

  describe('security', () => {
    it('writes each message to the outbox as <id>.eml when no SMTP server is set, once per message', async () => {
      const trial = await startTestApp(kind);
      const local = createDispatcher(trial.services.outbound, silent, { idlePollMs: 20 });
      local.start();
      try {
        const account = await trial.createAccount();
        const id = await trial.services.outbound.enqueueEmail(trial.db, account.id, {
          to: ['person@leads.test'],
          subject: 'Trial',
          text: 'Written, not sent',
          attachments: [
            {
              filename: 'a.ics',
              contentType: 'text/calendar',
              contentBase64: Buffer.from(ICS).toString('base64'),
            },
          ],
        });
        const outbox = trial.services.outbound.describeMail().replace(/^files in /, '');
        await waitFor(
          async () => (await readdir(outbox).catch((): string[] => [])).includes(`${id}.eml`),
          5_000,
          'the .eml file',
        );
        expect(await readdir(outbox)).toEqual([`${id}.eml`]);
        const mail = await simpleParser(await readFile(path.join(outbox, `${id}.eml`)));
        expect(mail.subject).toBe('Trial');
        expect(mail.text?.trim()).toBe('Written, not sent');
        expect(mail.attachments[0]?.filename).toBe('a.ics');
      } finally {
        await local.stop(1_000);
        await trial.close();
      }
    });
  });
});

import type { ParsedMail } from 'mailparser';
import ical, { type VEvent } from 'node-ical';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { whenText } from '../../src/modules/booking/booking.emails.ts';
import { createDispatcher, type Dispatcher } from '../../src/outbound/dispatcher.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { waitFor } from '../outbound/receiver.ts';
import { type SmtpServer, startSmtpServer } from '../outbound/smtp-server.ts';
import { bookingAccount, recordWithLink, testClock } from './support.ts';

const silent = { info() {}, warn() {}, error() {} };
const clock = testClock('2027-03-22T06:00:00Z');

/** The calendar object of a mail's .ics attachment, parsed by an iCalendar library. */
function calendarOf(mail: ParsedMail) {
  const attachment = mail.attachments.find((item) => item.filename?.endsWith('.ics'));
  if (!attachment) throw new Error('no .ics attachment');
  const parsed = ical.sync.parseICS(attachment.content.toString('utf8'));
  const event = Object.values(parsed).find((item) => item?.type === 'VEVENT') as VEvent;
  const method = (parsed.vcalendar as unknown as { method: string }).method;
  return { attachment, event, method };
}

describe.each(TEST_DATABASES)('booking emails through SMTP on %s', (kind) => {
  let smtp: SmtpServer;
  let t: TestApp;
  let dispatcher: Dispatcher;
  beforeAll(async () => {
    smtp = await startSmtpServer();
    t = await startTestApp(kind, {
      now: clock.now,
      outbound: { smtpUrl: smtp.url, mailFrom: 'Solar Team <team@leads.test>', retryScheduleMs: [50] },
    });
    dispatcher = createDispatcher(t.services.outbound, silent, { idlePollMs: 20 });
    dispatcher.start();
  });
  afterAll(async () => {
    await dispatcher?.stop(1_000);
    await t?.close();
    await smtp?.close();
  });

  const mailsTo = (address: string) =>
    smtp.received.filter((mail) => (mail.to as { text: string } | undefined)?.text.includes(address));

  describe('happy path', () => {
    it('confirms a booking with a METHOD:REQUEST invitation and cancels it with METHOD:CANCEL, same UID, next SEQUENCE', async () => {
      const { account } = await bookingAccount(t);
      const link = await recordWithLink(t, account, 'Ann.Person@Example.com');
      const booked = await t.request({
        method: 'POST',
        url: '/api/v1/booking/book',
        body: { token: link.token, starts_at: '2027-03-22T09:00:00Z' },
      });
      expect(booked.statusCode).toBe(201);
      const appointmentId = booked.json().appointment_id;
      await waitFor(() => mailsTo('ann.person@example.com').length >= 1, 10_000, 'the confirmation');
      const confirmation = mailsTo('ann.person@example.com')[0]!;
      expect(confirmation.subject).toBe('Appointment confirmed: Intro call');
      expect(confirmation.text).toContain('Monday, 22 March 2027, 10:00–10:30 (Europe/Berlin)');
      const invite = calendarOf(confirmation);
      expect(invite.attachment.contentType).toBe('text/calendar');
      expect(invite.method).toBe('REQUEST');
      expect(invite.event.uid).toBe(`${appointmentId}@leadline`);
      expect(Number(invite.event.sequence)).toBe(0);
      expect(invite.event.start.toISOString()).toBe('2027-03-22T09:00:00.000Z');
      expect(invite.event.end?.toISOString()).toBe('2027-03-22T09:30:00.000Z');
      expect(String(invite.event.summary)).toBe('Intro call');
      expect(JSON.stringify(invite.event.organizer).toLowerCase()).toContain('mailto:team@leads.test');
      expect(JSON.stringify(invite.event.attendee).toLowerCase()).toContain('mailto:ann.person@example.com');

      const cancelled = await t.request({
        method: 'POST',
        url: `/api/v1/booking/appointments/${appointmentId}/cancel`,
        key: account.apiKey,
        body: { reason: 'Sick' },
      });
      expect(cancelled.statusCode).toBe(200);
      await waitFor(() => mailsTo('ann.person@example.com').length >= 2, 10_000, 'the cancellation');
      const cancellation = mailsTo('ann.person@example.com')[1]!;
      expect(cancellation.subject).toBe('Appointment cancelled: Intro call');
      const withdrawn = calendarOf(cancellation);
      expect(withdrawn.method).toBe('CANCEL');
      expect(withdrawn.event.uid).toBe(invite.event.uid);
      expect(Number(withdrawn.event.sequence)).toBe(1);
      expect(withdrawn.event.status).toBe('CANCELLED');
    });
  });

  describe('errors', () => {
    it('sends nothing for a record without an email-role value', async () => {
      const { account } = await bookingAccount(t);
      await t.request({
        method: 'PUT',
        url: '/api/v1/settings/entities/contact',
        key: account.apiKey,
        body: { name: 'Contact', fields: [{ key: 'name', label: 'Name', type: 'text' }] },
      });
      const response = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: {
          entity: 'contact',
          fields: { name: 'No Mail' },
          booking: { starts_at: '2027-03-23T09:00:00Z' },
        },
      });
      expect(response.json().booking.appointment_id).toBeDefined();
      const emails = await t.db
        .selectFrom('outbound_messages')
        .select('id')
        .where('account_id', '=', account.id)
        .where('channel', '=', 'email')
        .execute();
      expect(emails).toEqual([]);
    });
  });
});

describe('the time an appointment email names', () => {
  it('names the zone of a start or end in the hour that repeats when summer time ends', () => {
    const at = (iso: string) => new Date(iso);
    expect(whenText(at('2026-10-25T01:30:00Z'), at('2026-10-25T02:00:00Z'), 'Europe/Berlin')).toBe(
      'Sunday, 25 October 2026, 02:30 CET–03:00 (Europe/Berlin)',
    );
    expect(whenText(at('2026-10-25T00:00:00Z'), at('2026-10-25T00:30:00Z'), 'Europe/Berlin')).toBe(
      'Sunday, 25 October 2026, 02:00 CEST–02:30 CEST (Europe/Berlin)',
    );
    // Any other night: the clock time alone, also across the hour that spring skips.
    expect(whenText(at('2027-03-28T00:30:00Z'), at('2027-03-28T01:00:00Z'), 'Europe/Berlin')).toBe(
      'Sunday, 28 March 2027, 01:30–03:00 (Europe/Berlin)',
    );
    expect(whenText(at('2026-11-01T05:30:00Z'), at('2026-11-01T06:00:00Z'), 'America/New_York')).toBe(
      'Sunday, 1 November 2026, 01:30 GMT-4–01:00 GMT-5 (America/New_York)',
    );
  });
});

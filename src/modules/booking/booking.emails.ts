import ical, {
  ICalAttendeeRole,
  ICalAttendeeStatus,
  ICalCalendarMethod,
  ICalEventStatus,
} from 'ical-generator';
import { DateTime } from 'luxon';
import { escapeHtml } from '../../lib/text.ts';
import type { EmailContent } from '../../outbound/mail-sender.ts';
import { clockTime } from './booking.clock.ts';

export interface AppointmentMail {
  id: string;
  title: string;
  startsAt: Date;
  endsAt: Date;
  /** Counts up with each change of the appointment (RFC 5545 SEQUENCE). */
  sequence: number;
  timeZone: string;
  calendarName: string;
  to: string;
  personName: string | null;
  organizer: { name: string; email: string };
}

/** The appointment's UID: the same in the invitation and its cancellation, so that calendars pair them. */
export function appointmentUid(id: string): string {
  return `${id}@leadline`;
}

/** An iCalendar object with one event (METHOD REQUEST to invite, CANCEL to withdraw it). */
export function icsOf(mail: AppointmentMail, method: 'REQUEST' | 'CANCEL'): string {
  const calendar = ical({
    prodId: { company: 'Leadline', product: 'Booking', language: 'EN' },
    method: method === 'REQUEST' ? ICalCalendarMethod.REQUEST : ICalCalendarMethod.CANCEL,
  });
  calendar.createEvent({
    id: appointmentUid(mail.id),
    sequence: mail.sequence,
    start: mail.startsAt,
    end: mail.endsAt,
    stamp: new Date(),
    summary: mail.title,
    status: method === 'REQUEST' ? ICalEventStatus.CONFIRMED : ICalEventStatus.CANCELLED,
    organizer: mail.organizer,
    attendees: [
      {
        email: mail.to,
        name: mail.personName ?? undefined,
        role: ICalAttendeeRole.REQ,
        status: method === 'REQUEST' ? ICalAttendeeStatus.ACCEPTED : ICalAttendeeStatus.DECLINED,
      },
    ],
  });
  return calendar.toString();
}

/** "Monday, 6 April 2026, 09:00–09:30 (Europe/Berlin)", in the calendar's zone. */
export function whenText(startsAt: Date, endsAt: Date, timeZone: string): string {
  const start = DateTime.fromJSDate(startsAt, { zone: timeZone }).setLocale('en-GB');
  const end = DateTime.fromJSDate(endsAt, { zone: timeZone }).setLocale('en-GB');
  return `${start.toFormat('cccc, d LLLL yyyy')}, ${clockTime(start)}–${clockTime(end)} (${timeZone})`;
}

/** The confirmation (with an invitation) or the cancellation (with a cancelling .ics) of an appointment. */
export function appointmentEmail(mail: AppointmentMail, kind: 'confirmation' | 'cancellation'): EmailContent {
  const when = whenText(mail.startsAt, mail.endsAt, mail.timeZone);
  const method = kind === 'confirmation' ? 'REQUEST' : 'CANCEL';
  const greeting = mail.personName ? `Hello ${mail.personName},` : 'Hello,';
  const line =
    kind === 'confirmation'
      ? `your appointment "${mail.title}" is booked for ${when}.`
      : `your appointment "${mail.title}" on ${when} has been cancelled.`;
  const closing =
    kind === 'confirmation'
      ? 'The attached invitation adds it to your calendar.'
      : 'The attached file removes it from your calendar.';
  return {
    to: [mail.to],
    subject:
      kind === 'confirmation'
        ? `Appointment confirmed: ${mail.title}`
        : `Appointment cancelled: ${mail.title}`,
    text: `${greeting}\n\n${line}\n\n${closing}\n\n${mail.calendarName}\n`,
    html: `<p>${escapeHtml(greeting)}</p><p>${escapeHtml(line)}</p><p>${escapeHtml(closing)}</p><p>${escapeHtml(mail.calendarName)}</p>`,
    attachments: [
      {
        filename: kind === 'confirmation' ? 'invite.ics' : 'cancel.ics',
        contentType: `text/calendar; method=${method}; charset=UTF-8`,
        contentBase64: Buffer.from(icsOf(mail, method), 'utf8').toString('base64'),
      },
    ],
  };
}

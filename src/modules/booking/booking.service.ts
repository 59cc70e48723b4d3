import { randomUUID } from 'node:crypto';
import type { Db, Executor } from '../../db/types.ts';
import { AppError, type ValidationDetail } from '../../http/errors.ts';
import { iso, NAME_PATTERN } from '../../http/schemas.ts';
import { generateToken, hashSecret } from '../../lib/credentials.ts';
import { decodeCursor, encodeCursor, refuseUnstorableTimes, timeBound } from '../../lib/cursor.ts';
import { zoneName } from '../../lib/time-zones.ts';
import type { OutboundService } from '../../outbound/outbound.service.ts';
import type { RecordsRepo } from '../records/records.repo.ts';
import type { AppointmentMail } from './booking.emails.ts';
import type { AppointmentRow, BookingRepo, CalendarColumns, CalendarRow, LinkRow } from './booking.repo.ts';
import { type CalendarRules, type Hours, isHourMinute, minutesOf, WEEKDAYS } from './booking.rules.ts';

/**
 * The slot grid and the reading of times (Luxon), and the appointment emails (Luxon and
 * ical-generator), are loaded with the first call that needs them, not with the service.
 */
let slotsLoading: Promise<typeof import('./booking.slots.ts')> | undefined;
function slotsModule() {
  slotsLoading ??= import('./booking.slots.ts');
  return slotsLoading;
}
let emailsLoading: Promise<typeof import('./booking.emails.ts')> | undefined;
function emailsModule() {
  emailsLoading ??= import('./booking.emails.ts');
  return emailsLoading;
}

/** Calendars per account: more than any team books through, bounded like every input. */
export const MAX_CALENDARS = 50;
/** The public slot listing covers at most this many days per call. */
export const MAX_SLOT_RANGE_DAYS = 31;
const DAY_MS = 86_400_000;

export interface CalendarInput {
  name?: string;
  time_zone?: string;
  slot_minutes?: number;
  buffer_minutes?: number;
  min_notice_minutes?: number;
  horizon_days?: number;
  capacity?: number;
  /** Windows as the schema checked them: two "HH:MM" each. */
  weekly?: Partial<Record<string, string[][]>>;
  exceptions?: { date: string; hours: string[][] }[];
  default?: boolean;
}

/** What an intake `booking` node asks for (S2 `booking`, S1 `booking:*` keys). */
export interface BookingRequest {
  title?: string;
  durationMinutes?: number;
  /** As given; read here, so that an unreadable time is a warning, never a refusal. */
  startsAt?: unknown;
  calendarId?: string;
}

/** The `booking` object of an intake answer (interface: Booking object). */
export type BookingAnswer =
  | { token: string; url: string; expires_at: string }
  | { appointment_id: string; starts_at: string };

export interface BookingWarning {
  key: string;
  reason: string;
  message?: string;
}

/** Who books: the history's actor and the request. */
export interface BookingActor {
  actor: string;
  requestId: string | null;
}

export interface BookingServiceDeps {
  db: Db;
  repo: BookingRepo;
  records: Pick<RecordsRepo, 'insertEvents'>;
  outbound: Pick<OutboundService, 'emitEvent' | 'enqueueEmail'>;
  currentPublicUrl: () => string;
  /** Lifetime of a booking link (LEADS_BOOKING_LINK_TTL_S, 14 days). */
  linkTtlMs?: number;
  /** The sender of booking emails, named as the organizer in their invitations. */
  organizer?: { name: string; email: string };
  /** The clock (tests set it). */
  now?: () => Date;
}

function rulesOf(calendar: CalendarRow): CalendarRules {
  return {
    timeZone: calendar.time_zone,
    slotMinutes: calendar.slot_minutes,
    bufferMinutes: calendar.buffer_minutes,
    minNoticeMinutes: calendar.min_notice_minutes,
    horizonDays: calendar.horizon_days,
    weekly: calendar.weekly,
    exceptions: calendar.exceptions,
  };
}

export function presentCalendar(row: CalendarRow) {
  return {
    id: row.id,
    name: row.name,
    time_zone: row.time_zone,
    slot_minutes: row.slot_minutes,
    buffer_minutes: row.buffer_minutes,
    min_notice_minutes: row.min_notice_minutes,
    horizon_days: row.horizon_days,
    capacity: row.capacity,
    weekly: Object.fromEntries(WEEKDAYS.map((day) => [day, row.weekly[day] ?? []])),
    exceptions: row.exceptions,
    default: row.is_default,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

export function presentAppointment(row: AppointmentRow) {
  return {
    id: row.id,
    calendar_id: row.calendar_id,
    record_id: row.record_id,
    title: row.title,
    starts_at: iso(row.starts_at),
    ends_at: iso(row.ends_at),
    status: row.status as 'booked' | 'cancelled',
    created_at: iso(row.created_at),
  };
}

function checkHours(key: string, hours: Hours, problems: ValidationDetail[]) {
  const windows: [number, number][] = [];
  for (const [index, window] of hours.entries()) {
    const [open, close] = window;
    if (window.length !== 2 || !isHourMinute(open) || !isHourMinute(close) || open === '24:00') {
      problems.push({ key: `${key}.${index}`, reason: 'invalid_format', message: 'hours are "HH:MM" pairs' });
      continue;
    }
    if (minutesOf(open) >= minutesOf(close)) {
      problems.push({
        key: `${key}.${index}`,
        reason: 'invalid_range',
        message: `${open} is not before ${close}`,
      });
      continue;
    }
    windows.push([minutesOf(open), minutesOf(close)]);
  }
  windows.sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < windows.length; i++) {
    if (windows[i]![0] < windows[i - 1]![1]) {
      problems.push({ key, reason: 'overlapping', message: 'opening hours of one day overlap' });
      break;
    }
  }
}

function isCalendarDate(date: string): boolean {
  const parsed = new Date(`${date}T00:00:00Z`);
  return !Number.isNaN(parsed.getTime()) && parsed.toISOString().slice(0, 10) === date;
}

/**
 * The zone a calendar is given, as it is stored (`zoneName`); one that is no IANA zone
 * name is a problem (a bare offset such as `+01:00` too).
 */
function zoneColumn(given: string, problems: ValidationDetail[]): string {
  const zone = zoneName(given);
  if (zone !== null) return zone;
  problems.push({
    key: 'time_zone',
    reason: 'invalid_time_zone',
    message: 'an IANA time zone name, e.g. Europe/Berlin (not an offset such as +01:00)',
  });
  return given;
}

/** Checks a calendar's settings beyond their schema: hours, dates (the zone: `zoneColumn`). */
function checkCalendar(input: CalendarColumns, problems: ValidationDetail[]): void {
  for (const day of Object.keys(input.weekly)) checkHours(`weekly.${day}`, input.weekly[day]!, problems);
  const dates = new Set<string>();
  for (const [index, exception] of input.exceptions.entries()) {
    if (!isCalendarDate(exception.date)) {
      problems.push({
        key: `exceptions.${index}.date`,
        reason: 'invalid_format',
        message: 'a date YYYY-MM-DD',
      });
    } else if (dates.has(exception.date)) {
      problems.push({
        key: `exceptions.${index}.date`,
        reason: 'duplicate',
        message: `${exception.date} is listed twice`,
      });
    }
    dates.add(exception.date);
    checkHours(`exceptions.${index}.hours`, exception.hours, problems);
  }
  if (problems.length > 0) throw new AppError('validation_failed', { details: problems });
}

/**
 * How long an appointment booked with a link lasts: the length its intake asked for, at most
 * the calendar's slot length as it is now, or that slot length when none was asked (null), so
 * that a link follows a calendar whose `slot_minutes` changed after it was made and never books
 * more than one slot (docs/decisions.md, Booking: a link's duration).
 */
export function linkMinutes(
  link: Pick<LinkRow, 'duration_minutes'>,
  calendar: Pick<CalendarRow, 'slot_minutes'>,
): number {
  return Math.min(link.duration_minutes ?? calendar.slot_minutes, calendar.slot_minutes);
}

/** A title with a character other than a blank, by the rule of names (HTTP conventions). */
const TEXT = new RegExp(NAME_PATTERN, 'u');
function hasText(value: string): boolean {
  return TEXT.test(value);
}

/**
 * An intake booking's title of blanks only (`""`, `"   "`): the appointment takes the calendar's
 * name and the answer says so, as a blank note is a warning; never a 422, since the record is
 * created in every case (docs/decisions.md, Booking: a blank title).
 */
function blankTitleWarning(): BookingWarning {
  return {
    key: 'booking.title',
    reason: 'blank',
    message: "the title holds no text: the calendar's name is the appointment's title",
  };
}

function calendarNotFound(): AppError {
  return new AppError('not_found', { message: 'Calendar not found' });
}

function linkNotFound(): AppError {
  return new AppError('not_found', { message: 'No booking link with this token' });
}

/** The state of a booking link, for the public page and its JSON. */
export type LinkState = 'open' | 'used' | 'expired';

export function createBookingService({
  db,
  repo,
  records,
  outbound,
  currentPublicUrl,
  linkTtlMs = 1_209_600_000,
  organizer = { name: 'Leadline', email: 'leadline@localhost' },
  now = () => new Date(),
}: BookingServiceDeps) {
  async function findCalendar(accountId: string, id: string, tx: Executor = db) {
    const row = await repo.findCalendar(accountId, id, tx);
    if (!row) throw calendarNotFound();
    return row;
  }

  /**
   * Slots of a calendar in [from, to) with a seat left in each of their minutes: booked
   * appointments count where they overlap a slot, also when the grid has changed since.
   */
  async function freeSlots(
    accountId: string,
    calendar: CalendarRow,
    from: Date,
    to: Date,
    durationMinutes: number,
    tx: Executor = db,
  ) {
    const { gridSlots, mostAtOnce } = await slotsModule();
    const grid = gridSlots(rulesOf(calendar), from, to, now());
    if (grid.length === 0) return [];
    const slots = grid.map((slot) => ({
      startsAt: slot.startsAt,
      endsAt: new Date(slot.startsAt.getTime() + durationMinutes * 60_000),
    }));
    const last = slots[slots.length - 1]!;
    const booked = await repo.bookedTimes(accountId, calendar.id, slots[0]!.startsAt, last.endsAt, tx);
    return slots.filter((slot) => mostAtOnce(booked, slot.startsAt, slot.endsAt) < calendar.capacity);
  }

  /** The history event, the account webhook and the person's email of a booked or cancelled appointment. */
  async function announce(
    tx: Executor,
    accountId: string,
    appointment: AppointmentRow,
    calendar: Pick<CalendarRow, 'name' | 'time_zone'>,
    who: BookingActor,
    kind: 'booked' | 'cancelled',
  ) {
    const when = iso(appointment.starts_at);
    await records.insertEvents(
      accountId,
      [
        {
          recordId: appointment.record_id,
          type: kind === 'booked' ? 'appointment_booked' : 'appointment_cancelled',
          message:
            kind === 'booked'
              ? `Appointment booked: ${appointment.title} at ${when}`
              : `Appointment cancelled: ${appointment.title} at ${when}`,
          actor: who.actor,
          data: {
            appointment_id: appointment.id,
            calendar_id: appointment.calendar_id,
            starts_at: when,
            ends_at: iso(appointment.ends_at),
            ...(kind === 'cancelled' ? { reason: appointment.cancel_reason } : {}),
            request_id: who.requestId,
          },
        },
      ],
      tx,
    );
    await outbound.emitEvent(tx, accountId, kind === 'booked' ? 'booking.created' : 'booking.cancelled', {
      appointment: presentAppointment(appointment),
    });
    const contact = await repo.recordContact(accountId, appointment.record_id, tx);
    if (!contact?.email_lc) return;
    const mail: AppointmentMail = {
      id: appointment.id,
      title: appointment.title,
      startsAt: appointment.starts_at,
      endsAt: appointment.ends_at,
      sequence: appointment.sequence,
      timeZone: calendar.time_zone,
      calendarName: calendar.name,
      to: contact.email_lc,
      personName: contact.name && contact.name !== contact.email_lc ? contact.name : null,
      organizer,
    };
    const { appointmentEmail } = await emailsModule();
    await outbound.enqueueEmail(
      tx,
      accountId,
      appointmentEmail(mail, kind === 'booked' ? 'confirmation' : 'cancellation'),
      { type: kind === 'booked' ? 'booking.confirmation' : 'booking.cancellation', ref: appointment.id },
    );
  }

  /**
   * Books `startsAt` if the calendar offers it and a seat is free, with everything that follows
   * from it, inside `tx`. Undefined when the slot is taken or not on offer.
   */
  async function bookSlot(
    tx: Executor,
    accountId: string,
    calendar: CalendarRow,
    booking: {
      recordId: string;
      linkId: string | null;
      title: string;
      startsAt: Date;
      durationMinutes: number;
    },
    who: BookingActor,
  ): Promise<AppointmentRow | undefined> {
    const { isOffered } = await slotsModule();
    if (!isOffered(rulesOf(calendar), booking.startsAt, now())) return undefined;
    const appointment = await repo.insertAppointment(
      accountId,
      {
        recordId: booking.recordId,
        calendarId: calendar.id,
        linkId: booking.linkId,
        title: booking.title,
        startsAt: booking.startsAt,
        endsAt: new Date(booking.startsAt.getTime() + booking.durationMinutes * 60_000),
      },
      calendar.capacity,
      tx,
    );
    if (appointment) await announce(tx, accountId, appointment, calendar, who, 'booked');
    return appointment;
  }

  async function createLink(
    tx: Executor,
    accountId: string,
    calendar: CalendarRow,
    link: { recordId: string; title: string; durationMinutes: number | null },
  ) {
    const token = generateToken('bk_');
    const expiresAt = new Date(now().getTime() + linkTtlMs);
    await repo.insertLink(
      accountId,
      {
        id: randomUUID(),
        recordId: link.recordId,
        calendarId: calendar.id,
        tokenHash: hashSecret(token),
        title: link.title,
        durationMinutes: link.durationMinutes,
        expiresAt,
      },
      tx,
    );
    return { token, url: `${currentPublicUrl()}/book/${token}`, expires_at: iso(expiresAt) };
  }

  /**
   * A link by its token, with its calendar; 404 for an unknown token, 403 `module_not_enabled`
   * when its account no longer has the booking module. `lock` is for booking with it.
   */
  async function linkOf(token: string, tx: Executor = db, lock = false) {
    if (!/^bk_[0-9A-Za-z]{1,64}$/.test(token)) throw linkNotFound();
    const link = await repo.linkByTokenHash(hashSecret(token), tx, lock);
    if (!link) throw linkNotFound();
    if (!link.account_modules.includes('booking')) {
      throw new AppError('module_not_enabled', { message: 'Booking is not available for this link' });
    }
    const calendar = await repo.findCalendar(
      link.account_id,
      link.calendar_id,
      tx,
      lock ? 'share' : undefined,
    );
    if (!calendar) throw linkNotFound();
    const state: LinkState =
      link.appointment_id !== null
        ? 'used'
        : link.expires_at.getTime() <= now().getTime()
          ? 'expired'
          : 'open';
    return { link, calendar, state };
  }

  function refuseUnusable(state: LinkState) {
    if (state === 'used')
      throw new AppError('already_booked', { message: 'This link was used for a booking already' });
    if (state === 'expired')
      throw new AppError('token_expired', { message: 'This booking link has expired' });
  }

  async function slotRange(from: string | undefined, to: string | undefined, horizonDays: number) {
    const { readStartsAt } = await slotsModule();
    const start = from ? (readStartsAt(from) ?? readDay(from, 'from')) : now();
    const end = to
      ? (readStartsAt(to) ?? readDay(to, 'to'))
      : new Date(start.getTime() + Math.min(horizonDays, 7) * DAY_MS);
    if (end.getTime() - start.getTime() > MAX_SLOT_RANGE_DAYS * DAY_MS || end < start) {
      throw new AppError('validation_failed', {
        details: [
          {
            key: 'to',
            reason: 'invalid_range',
            message: `to is after from, at most ${MAX_SLOT_RANGE_DAYS} days later`,
          },
        ],
      });
    }
    return { start, end };
  }

  return {
    now,

    async createCalendar(accountId: string, input: CalendarInput & { name: string; time_zone: string }) {
      const problems: ValidationDetail[] = [];
      const columns: CalendarColumns = {
        name: input.name.trim(),
        time_zone: zoneColumn(input.time_zone, problems),
        slot_minutes: input.slot_minutes ?? 30,
        buffer_minutes: input.buffer_minutes ?? 0,
        min_notice_minutes: input.min_notice_minutes ?? 60,
        horizon_days: input.horizon_days ?? 30,
        capacity: input.capacity ?? 1,
        weekly: (input.weekly ?? {}) as Record<string, [string, string][]>,
        exceptions: (input.exceptions ?? []) as CalendarColumns['exceptions'],
      };
      checkCalendar(columns, problems);
      const id = randomUUID();
      await db.transaction().execute(async (tx) => {
        await repo.lockCalendars(accountId, tx);
        const count = await repo.countCalendars(accountId, tx);
        if (count >= MAX_CALENDARS) {
          throw new AppError('validation_failed', {
            details: [
              { key: 'name', reason: 'too_many', message: `at most ${MAX_CALENDARS} calendars per account` },
            ],
          });
        }
        // The first calendar is the default (decisions §11); `default: true` takes it over.
        const isDefault = count === 0 || input.default === true;
        if (isDefault) await repo.clearDefault(accountId, tx);
        await repo.insertCalendar(accountId, id, columns, isDefault, tx);
      });
      return presentCalendar(await findCalendar(accountId, id));
    },

    async listCalendars(accountId: string, limit: number, cursor: string | undefined) {
      const rows = await repo.listCalendars(accountId, limit + 1, decodeCursor(cursor));
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return {
        calendars: page.map(presentCalendar),
        next_cursor: rows.length > limit && last ? encodeCursor(last.created_at, last.id) : null,
      };
    },

    async getCalendar(accountId: string, id: string) {
      return presentCalendar(await findCalendar(accountId, id));
    },

    async updateCalendar(accountId: string, id: string, input: CalendarInput) {
      await db.transaction().execute(async (tx) => {
        await repo.lockCalendars(accountId, tx);
        const row = await findCalendar(accountId, id, tx);
        const problems: ValidationDetail[] = [];
        const columns: CalendarColumns = {
          name: input.name?.trim() ?? row.name,
          // A stored zone left out stays as it is; a given one is read as on creation.
          time_zone: input.time_zone === undefined ? row.time_zone : zoneColumn(input.time_zone, problems),
          slot_minutes: input.slot_minutes ?? row.slot_minutes,
          buffer_minutes: input.buffer_minutes ?? row.buffer_minutes,
          min_notice_minutes: input.min_notice_minutes ?? row.min_notice_minutes,
          horizon_days: input.horizon_days ?? row.horizon_days,
          capacity: input.capacity ?? row.capacity,
          weekly: (input.weekly ?? row.weekly) as Record<string, [string, string][]>,
          exceptions: (input.exceptions ?? row.exceptions) as CalendarColumns['exceptions'],
        };
        checkCalendar(columns, problems);
        await repo.updateCalendar(accountId, id, columns, tx);
        if (input.default === true && !row.is_default) {
          await repo.clearDefault(accountId, tx);
          await repo.setDefault(accountId, id, tx);
        } else if (input.default === false && row.is_default) {
          throw new AppError('validation_failed', {
            details: [
              {
                key: 'default',
                reason: 'default_required',
                message: 'make another calendar the default instead',
              },
            ],
          });
        }
      });
      return presentCalendar(await findCalendar(accountId, id));
    },

    async deleteCalendar(accountId: string, id: string) {
      await db.transaction().execute(async (tx) => {
        await repo.lockCalendars(accountId, tx);
        const row = await findCalendar(accountId, id, tx);
        if ((await repo.countBookedFrom(accountId, id, now(), tx)) > 0) {
          throw new AppError('conflict', {
            message: 'The calendar has booked appointments ahead; cancel them first',
          });
        }
        await repo.deleteCalendar(accountId, id, tx);
        if (row.is_default) {
          const next = await repo.oldestCalendar(accountId, tx);
          if (next) await repo.setDefault(accountId, next.id, tx);
        }
      });
    },

    /**
     * The intake `booking` node, inside the intake's transaction (interface: rules 2 and 3):
     * books the slot asked for, or makes a link; what could not be done is a warning.
     */
    async forIntake(
      tx: Executor,
      accountId: string,
      recordId: string,
      request: BookingRequest,
      who: BookingActor,
    ): Promise<{ booking: BookingAnswer | null; warnings: BookingWarning[] }> {
      const warnings: BookingWarning[] = [];
      // A booking holds its calendar's row in `share` mode (see BookingRepo.findCalendar).
      const lock = request.startsAt === undefined ? undefined : 'share';
      const calendar = request.calendarId
        ? await repo.findCalendar(accountId, request.calendarId, tx, lock)
        : await repo.defaultCalendar(accountId, tx, lock);
      if (!calendar) {
        warnings.push({
          key: 'booking',
          reason: 'no_calendar',
          message: request.calendarId ? `no calendar ${request.calendarId}` : 'the account has no calendar',
        });
        return { booking: null, warnings };
      }
      let durationMinutes = request.durationMinutes ?? calendar.slot_minutes;
      if (durationMinutes > calendar.slot_minutes) {
        warnings.push({
          key: 'booking.duration_minutes',
          reason: 'duration_too_long',
          message: `the calendar's slots are ${calendar.slot_minutes} minutes; the appointment lasts that long`,
        });
        durationMinutes = calendar.slot_minutes;
      }
      let title = calendar.name;
      if (request.title !== undefined) {
        if (hasText(request.title)) title = request.title.trim();
        else warnings.push(blankTitleWarning());
      }
      if (request.startsAt !== undefined) {
        const { readStartsAt } = await slotsModule();
        const startsAt = readStartsAt(request.startsAt);
        if (!startsAt) {
          warnings.push({
            key: 'booking.starts_at',
            reason: 'invalid_starts_at',
            message: 'starts_at is an ISO 8601 time with an offset, e.g. 2026-04-06T09:00:00+02:00',
          });
        } else {
          const appointment = await bookSlot(
            tx,
            accountId,
            calendar,
            { recordId, linkId: null, title, startsAt, durationMinutes },
            who,
          );
          if (appointment) {
            return {
              booking: { appointment_id: appointment.id, starts_at: iso(appointment.starts_at) },
              warnings,
            };
          }
          warnings.push({
            key: 'booking.starts_at',
            reason: 'slot_taken',
            message: 'the slot is taken or not on offer; the booking link lets the person pick another',
          });
        }
      }
      // A link without an asked length keeps none: it takes the slot length when it books.
      const link = await createLink(tx, accountId, calendar, {
        recordId,
        title,
        durationMinutes: request.durationMinutes === undefined ? null : durationMinutes,
      });
      return { booking: link, warnings };
    },

    /** A link's state and what the page shows of it; 404 for an unknown token. */
    async linkView(token: string) {
      const { link, calendar, state } = await linkOf(token);
      const appointment =
        state === 'used' && link.appointment_id
          ? await repo.findAppointment(link.account_id, link.appointment_id)
          : undefined;
      return { link, calendar, state, appointment };
    },

    /** GET /api/v1/booking/slots: the free slots of a link's calendar. */
    async publicSlots(token: string, from: string | undefined, to: string | undefined) {
      const { link, calendar, state } = await linkOf(token);
      refuseUnusable(state);
      const { start, end } = await slotRange(from, to, calendar.horizon_days);
      const durationMinutes = linkMinutes(link, calendar);
      const slots = await freeSlots(link.account_id, calendar, start, end, durationMinutes);
      return {
        time_zone: calendar.time_zone,
        duration_minutes: durationMinutes,
        slots: slots.map((slot) => ({ starts_at: iso(slot.startsAt), ends_at: iso(slot.endsAt) })),
      };
    },

    /**
     * POST /api/v1/booking/book and the page's form: books a slot once per link. `requestId`
     * goes into the history entry, as a booking by key or intake names its request.
     */
    async publicBook(token: string, startsAtText: string, requestId: string | null = null) {
      const { readStartsAt } = await slotsModule();
      const startsAt = readStartsAt(startsAtText);
      if (!startsAt) {
        throw new AppError('validation_failed', {
          details: [
            { key: 'starts_at', reason: 'invalid_starts_at', message: 'an ISO 8601 time with an offset' },
          ],
        });
      }
      return db.transaction().execute(async (tx) => {
        // The link's row stays locked until the booking commits: a second booking with the
        // same link waits here and then finds it used.
        const { link, calendar, state } = await linkOf(token, tx, true);
        refuseUnusable(state);
        const appointment = await bookSlot(
          tx,
          link.account_id,
          calendar,
          {
            recordId: link.record_id,
            linkId: link.id,
            title: link.title,
            startsAt,
            durationMinutes: linkMinutes(link, calendar),
          },
          { actor: 'booking_link', requestId },
        );
        if (!appointment) throw new AppError('slot_taken', { message: 'The slot is taken or not on offer' });
        await repo.markLinkUsed(link.account_id, link.id, appointment.id, tx);
        return {
          appointment_id: appointment.id,
          starts_at: iso(appointment.starts_at),
          ends_at: iso(appointment.ends_at),
        };
      });
    },

    /** Free slots of a link's calendar in [from, to), for the page (its own range checks). */
    async slotsOfLink(link: LinkRow, calendar: CalendarRow, from: Date, to: Date) {
      return freeSlots(link.account_id, calendar, from, to, linkMinutes(link, calendar));
    },

    async listAppointments(
      accountId: string,
      query: {
        from?: string;
        to?: string;
        calendar_id?: string;
        record_id?: string;
        limit?: number;
        cursor?: string;
      },
    ) {
      const limit = query.limit ?? 100;
      // A date is its midnight UTC at both ends (the slots' reading): `to` stays exclusive.
      const from = timeBound(query.from, false);
      const to = timeBound(query.to, false);
      // The schema's date-time takes a leap second (23:59:60), which Date cannot read, and years
      // the database cannot hold: those are refused here as the records list refuses them.
      refuseUnstorableTimes({ from, to });
      // A reversed range is a mistake, as on the slot listing, not an empty page.
      if (from && to && to < from) {
        throw new AppError('validation_failed', {
          details: [{ key: 'to', reason: 'invalid_range', message: 'to must not be before from' }],
        });
      }
      const rows = await repo.listAppointments(
        accountId,
        {
          from,
          to,
          calendarId: query.calendar_id,
          recordId: query.record_id,
        },
        limit + 1,
        decodeCursor(query.cursor),
      );
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return {
        appointments: page.map(presentAppointment),
        next_cursor: rows.length > limit && last ? encodeCursor(last.starts_at, last.id) : null,
      };
    },

    async getAppointment(accountId: string, id: string) {
      const row = await repo.findAppointment(accountId, id);
      if (!row) throw new AppError('not_found', { message: 'Appointment not found' });
      return presentAppointment(row);
    },

    /** Cancels a booked appointment; a cancelled one answers as it is (nothing is sent again). */
    async cancelAppointment(accountId: string, id: string, reason: string | null, who: BookingActor) {
      return db.transaction().execute(async (tx) => {
        const cancelled = await repo.cancelAppointment(accountId, id, reason, tx);
        if (!cancelled) {
          const row = await repo.findAppointment(accountId, id, tx);
          if (!row) throw new AppError('not_found', { message: 'Appointment not found' });
          return presentAppointment(row);
        }
        const found = await repo.findCalendar(accountId, cancelled.calendar_id, tx, 'update');
        await repo.releaseSeats(accountId, cancelled.calendar_id, cancelled, tx);
        const calendar = found ?? { name: 'Leadline', time_zone: 'UTC' };
        await announce(tx, accountId, cancelled, calendar, who, 'cancelled');
        return presentAppointment(cancelled);
      });
    },
  };
}

/** A bare date `YYYY-MM-DD` of the slot query, read as midnight UTC. */
function readDay(value: string, key: string): Date {
  if (/^\d{4}-\d{2}-\d{2}$/.test(value) && isCalendarDate(value)) return new Date(`${value}T00:00:00Z`);
  throw new AppError('validation_failed', {
    details: [
      { key, reason: 'invalid_format', message: `${key} is a date or an ISO 8601 time with an offset` },
    ],
  });
}

export type BookingService = ReturnType<typeof createBookingService>;

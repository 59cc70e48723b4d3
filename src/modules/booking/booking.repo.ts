import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { toJson } from '../../db/json.ts';
import { pastCursor } from '../../db/keyset.ts';
import { lockNamed } from '../../db/transaction.ts';
import type { Executor } from '../../db/types.ts';
import type { CursorPosition } from '../../lib/cursor.ts';
import { seatMinutes } from './booking.rules.ts';

export interface CalendarColumns {
  name: string;
  time_zone: string;
  slot_minutes: number;
  buffer_minutes: number;
  min_notice_minutes: number;
  horizon_days: number;
  capacity: number;
  weekly: Record<string, [string, string][]>;
  exceptions: { date: string; hours: [string, string][] }[];
}

export interface CalendarRow extends CalendarColumns {
  id: string;
  is_default: boolean;
  created_at: Date;
  updated_at: Date;
}

export interface AppointmentRow {
  id: string;
  record_id: string;
  calendar_id: string;
  link_id: string | null;
  title: string;
  starts_at: Date;
  ends_at: Date;
  status: string;
  sequence: number;
  cancel_reason: string | null;
  created_at: Date;
}

export interface LinkRow {
  account_id: string;
  id: string;
  record_id: string;
  calendar_id: string;
  title: string;
  /** The length asked for, or null for the calendar's slot length (see `linkMinutes`). */
  duration_minutes: number | null;
  expires_at: Date;
  appointment_id: string | null;
  /** The modules its account has booked now (the public surface has no API key to carry them). */
  account_modules: string[];
}

const CALENDAR_COLUMNS = [
  'id',
  'name',
  'time_zone',
  'slot_minutes',
  'buffer_minutes',
  'min_notice_minutes',
  'horizon_days',
  'capacity',
  'weekly',
  'exceptions',
  'is_default',
  'created_at',
  'updated_at',
] as const;

const APPOINTMENT_COLUMNS = [
  'id',
  'record_id',
  'calendar_id',
  'link_id',
  'title',
  'starts_at',
  'ends_at',
  'status',
  'sequence',
  'cancel_reason',
  'created_at',
] as const;

function calendarValues(input: CalendarColumns) {
  return { ...input, weekly: toJson(input.weekly), exceptions: toJson(input.exceptions) };
}

export type CalendarLock = 'share' | 'update';

function withLock<Q extends { forShare(): Q; forNoKeyUpdate(): Q }>(
  query: Q,
  lock: CalendarLock | undefined,
): Q {
  if (lock === 'share') return query.forShare();
  if (lock === 'update') return query.forNoKeyUpdate();
  return query;
}

export function createBookingRepo(db: Executor) {
  return {
    /**
     * A calendar; `lock` holds its row until the transaction ends: `share` for a booking (bookings
     * do not wait for each other), `update` for a cancellation, which renumbers seats (see
     * releaseSeats) and so waits for the bookings in progress and they for it.
     */
    findCalendar(
      accountId: string,
      id: string,
      tx: Executor = db,
      lock?: CalendarLock,
    ): Promise<CalendarRow | undefined> {
      const query = tx
        .selectFrom('calendars')
        .select(CALENDAR_COLUMNS)
        .where('account_id', '=', accountId)
        .where('id', '=', id);
      return withLock(query, lock).executeTakeFirst();
    },

    defaultCalendar(
      accountId: string,
      tx: Executor = db,
      lock?: CalendarLock,
    ): Promise<CalendarRow | undefined> {
      const query = tx
        .selectFrom('calendars')
        .select(CALENDAR_COLUMNS)
        .where('account_id', '=', accountId)
        .where('is_default', '=', true);
      return withLock(query, lock).executeTakeFirst();
    },

    listCalendars(accountId: string, limit: number, after: CursorPosition | null, tx: Executor = db) {
      let query = tx.selectFrom('calendars').select(CALENDAR_COLUMNS).where('account_id', '=', accountId);
      if (after) {
        query = query.where(pastCursor('created_at', 'id', 'after', after.createdAt, after.id));
      }
      return query.orderBy('created_at').orderBy('id').limit(limit).execute() as Promise<CalendarRow[]>;
    },

    async countCalendars(accountId: string, tx: Executor = db): Promise<number> {
      const row = await tx
        .selectFrom('calendars')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('account_id', '=', accountId)
        .executeTakeFirstOrThrow();
      return Number(row.n);
    },

    /** Serialises changes of one account's calendars (the default flag moves between rows). */
    async lockCalendars(accountId: string, tx: Executor) {
      await lockNamed(tx, `calendars:${accountId}`);
    },

    async insertCalendar(
      accountId: string,
      id: string,
      input: CalendarColumns,
      isDefault: boolean,
      tx: Executor = db,
    ) {
      await tx
        .insertInto('calendars')
        .values({ account_id: accountId, id, ...calendarValues(input), is_default: isDefault })
        .execute();
    },

    async updateCalendar(accountId: string, id: string, input: CalendarColumns, tx: Executor = db) {
      await tx
        .updateTable('calendars')
        .set({ ...calendarValues(input), updated_at: new Date() })
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .execute();
    },

    async clearDefault(accountId: string, tx: Executor = db) {
      await tx
        .updateTable('calendars')
        .set({ is_default: false })
        .where('account_id', '=', accountId)
        .where('is_default', '=', true)
        .execute();
    },

    async setDefault(accountId: string, id: string, tx: Executor = db) {
      await tx
        .updateTable('calendars')
        .set({ is_default: true })
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .execute();
    },

    /** The oldest calendar left: the default after the default is deleted. */
    async oldestCalendar(accountId: string, tx: Executor = db) {
      return tx
        .selectFrom('calendars')
        .select('id')
        .where('account_id', '=', accountId)
        .orderBy('created_at')
        .orderBy('id')
        .executeTakeFirst();
    },

    async deleteCalendar(accountId: string, id: string, tx: Executor = db) {
      await tx.deleteFrom('calendars').where('account_id', '=', accountId).where('id', '=', id).execute();
    },

    async countBookedFrom(accountId: string, calendarId: string, from: Date, tx: Executor = db) {
      const row = await tx
        .selectFrom('appointments')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('account_id', '=', accountId)
        .where('calendar_id', '=', calendarId)
        .where('status', '=', 'booked')
        .where('ends_at', '>', from)
        .executeTakeFirstOrThrow();
      return Number(row.n);
    },

    /**
     * The times of a calendar's booked appointments that overlap [from, to). An appointment
     * lasts at most a day (its slot's length), which bounds the look-back.
     */
    bookedTimes(accountId: string, calendarId: string, from: Date, to: Date, tx: Executor = db) {
      return tx
        .selectFrom('appointments')
        .select(['starts_at', 'ends_at'])
        .where('account_id', '=', accountId)
        .where('calendar_id', '=', calendarId)
        .where('status', '=', 'booked')
        .where('starts_at', '>=', new Date(from.getTime() - 86_400_000))
        .where('starts_at', '<', to)
        .where('ends_at', '>', from)
        .execute();
    },

    /**
     * Books an appointment if every minute it covers has a seat below `capacity` left, or none.
     * The unique index over (calendar, minute, seat) decides: seat by seat, the minutes still
     * lacking one are inserted with ON CONFLICT DO NOTHING (an insert that meets a seat being
     * taken by a transaction not yet committed waits for it); a minute with no seat left undoes
     * the appointment and its seats.
     */
    async insertAppointment(
      accountId: string,
      input: {
        recordId: string;
        calendarId: string;
        linkId: string | null;
        title: string;
        startsAt: Date;
        endsAt: Date;
      },
      capacity: number,
      tx: Executor,
    ): Promise<AppointmentRow | undefined> {
      const row = await tx
        .insertInto('appointments')
        .values({
          account_id: accountId,
          id: randomUUID(),
          record_id: input.recordId,
          calendar_id: input.calendarId,
          link_id: input.linkId,
          title: input.title,
          starts_at: input.startsAt,
          ends_at: input.endsAt,
        })
        .returning(APPOINTMENT_COLUMNS)
        .executeTakeFirstOrThrow();
      const { first, last } = seatMinutes(input.startsAt, input.endsAt);
      let held = 0;
      for (let seat = 0; seat < capacity && held <= last - first; seat++) {
        const taken = await sql<{ minute: number }>`
          INSERT INTO appointment_seats (account_id, appointment_id, minute, calendar_id, seat)
          SELECT ${accountId}::uuid, ${row.id}::uuid, m, ${input.calendarId}::uuid, ${seat}::integer
          FROM generate_series(${first}::integer, ${last}::integer) AS m
          ON CONFLICT DO NOTHING
          RETURNING minute`.execute(tx);
        held += taken.rows.length;
      }
      if (held > last - first) return row;
      await tx
        .deleteFrom('appointments')
        .where('account_id', '=', accountId)
        .where('id', '=', row.id)
        .execute();
      return undefined;
    },
    findAppointment(accountId: string, id: string, tx: Executor = db): Promise<AppointmentRow | undefined> {
      return tx
        .selectFrom('appointments')
        .select(APPOINTMENT_COLUMNS)
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .executeTakeFirst();
    },

    listAppointments(
      accountId: string,
      filter: { from?: Date; to?: Date; calendarId?: string; recordId?: string },
      limit: number,
      after: CursorPosition | null,
      tx: Executor = db,
    ): Promise<AppointmentRow[]> {
      let query = tx
        .selectFrom('appointments')
        .select(APPOINTMENT_COLUMNS)
        .where('account_id', '=', accountId);
      if (filter.from) query = query.where('starts_at', '>=', filter.from);
      if (filter.to) query = query.where('starts_at', '<', filter.to);
      if (filter.calendarId) query = query.where('calendar_id', '=', filter.calendarId);
      if (filter.recordId) query = query.where('record_id', '=', filter.recordId);
      if (after) {
        // The cursor's time is the appointment's start: the list's order (decisions §11).
        query = query.where(pastCursor('starts_at', 'id', 'after', after.createdAt, after.id));
      }
      return query.orderBy('starts_at').orderBy('id').limit(limit).execute();
    },

    /**
     * Frees a cancelled appointment's seats, under the calendar's `update` lock (no booking of the
     * calendar in progress). The seats of each minute it covered are numbered 0, 1, … again
     * (through negative numbers, so that no two rows meet on the unique index on the way): a
     * minute holding more appointments than a lowered capacity keeps every seat below it taken.
     */
    async releaseSeats(accountId: string, calendarId: string, appointment: AppointmentRow, tx: Executor) {
      await tx
        .deleteFrom('appointment_seats')
        .where('account_id', '=', accountId)
        .where('appointment_id', '=', appointment.id)
        .execute();
      const { first, last } = seatMinutes(appointment.starts_at, appointment.ends_at);
      await sql`
        UPDATE appointment_seats s SET seat = -1 - r.n
        FROM (
          SELECT appointment_id, minute, seat,
            (row_number() OVER (PARTITION BY minute ORDER BY seat) - 1)::integer AS n
          FROM appointment_seats
          WHERE account_id = ${accountId}::uuid AND calendar_id = ${calendarId}::uuid
            AND minute BETWEEN ${first}::integer AND ${last}::integer
        ) r
        WHERE s.account_id = ${accountId}::uuid AND s.appointment_id = r.appointment_id
          AND s.minute = r.minute AND r.seat <> r.n`.execute(tx);
      await tx
        .updateTable('appointment_seats')
        .set((eb) => ({ seat: eb(eb.neg(eb.ref('seat')), '-', 1) }))
        .where('account_id', '=', accountId)
        .where('calendar_id', '=', calendarId)
        .where('minute', '>=', first)
        .where('minute', '<=', last)
        .where('seat', '<', 0)
        .execute();
    },

    /** Cancels a booked appointment (its seats are freed by releaseSeats); undefined when it was not booked. */
    cancelAppointment(accountId: string, id: string, reason: string | null, tx: Executor) {
      return tx
        .updateTable('appointments')
        .set((eb) => ({
          status: 'cancelled',
          cancel_reason: reason,
          cancelled_at: new Date(),
          sequence: eb('sequence', '+', 1),
        }))
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .where('status', '=', 'booked')
        .returning(APPOINTMENT_COLUMNS)
        .executeTakeFirst();
    },

    async insertLink(
      accountId: string,
      input: {
        id: string;
        recordId: string;
        calendarId: string;
        tokenHash: Buffer;
        title: string;
        durationMinutes: number | null;
        expiresAt: Date;
      },
      tx: Executor,
    ) {
      await tx
        .insertInto('booking_links')
        .values({
          account_id: accountId,
          id: input.id,
          record_id: input.recordId,
          calendar_id: input.calendarId,
          token_hash: input.tokenHash,
          title: input.title,
          duration_minutes: input.durationMinutes,
          expires_at: input.expiresAt,
        })
        .execute();
    },

    /**
     * A link by its token's hash, across accounts (the token is the credential of the public
     * page); `lock` holds the row until the transaction ends, so that one booking uses it.
     */
    async linkByTokenHash(tokenHash: Buffer, tx: Executor = db, lock = false): Promise<LinkRow | undefined> {
      let query = tx
        .selectFrom('booking_links')
        .select([
          'account_id',
          'id',
          'record_id',
          'calendar_id',
          'title',
          'duration_minutes',
          'expires_at',
          'appointment_id',
          // A subquery, not a join: FOR UPDATE below locks the link's row alone.
          (eb) =>
            eb
              .selectFrom('accounts')
              .select('accounts.modules')
              .whereRef('accounts.id', '=', 'booking_links.account_id')
              .$asScalar()
              .$notNull()
              .as('account_modules'),
        ])
        .where('token_hash', '=', tokenHash);
      if (lock) query = query.forUpdate();
      return query.executeTakeFirst();
    },

    async markLinkUsed(accountId: string, linkId: string, appointmentId: string, tx: Executor) {
      await tx
        .updateTable('booking_links')
        .set({ appointment_id: appointmentId })
        .where('account_id', '=', accountId)
        .where('id', '=', linkId)
        .execute();
    },

    /** What booking emails need of a record: its email-role value (lower case) and name. */
    recordContact(accountId: string, recordId: string, tx: Executor = db) {
      return tx
        .selectFrom('records')
        .select(['email_lc', 'name'])
        .where('account_id', '=', accountId)
        .where('id', '=', recordId)
        .executeTakeFirst();
    },
  };
}

export type BookingRepo = ReturnType<typeof createBookingRepo>;

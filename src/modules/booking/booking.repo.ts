import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { toJson } from '../../db/json.ts';
import type { Executor } from '../../db/types.ts';
import type { CursorPosition } from '../../lib/cursor.ts';

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
  duration_minutes: number;
  expires_at: Date;
  appointment_id: string | null;
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

export function createBookingRepo(db: Executor) {
  return {
    findCalendar(accountId: string, id: string, tx: Executor = db): Promise<CalendarRow | undefined> {
      return tx
        .selectFrom('calendars')
        .select(CALENDAR_COLUMNS)
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .executeTakeFirst();
    },

    defaultCalendar(accountId: string, tx: Executor = db): Promise<CalendarRow | undefined> {
      return tx
        .selectFrom('calendars')
        .select(CALENDAR_COLUMNS)
        .where('account_id', '=', accountId)
        .where('is_default', '=', true)
        .executeTakeFirst();
    },

    listCalendars(accountId: string, limit: number, after: CursorPosition | null, tx: Executor = db) {
      let query = tx.selectFrom('calendars').select(CALENDAR_COLUMNS).where('account_id', '=', accountId);
      if (after) {
        const at = new Date(after.createdAt);
        query = query.where((eb) =>
          eb.or([eb('created_at', '>', at), eb.and([eb('created_at', '=', at), eb('id', '>', after.id)])]),
        );
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
      await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`calendars:${accountId}`}, 0))`.execute(tx);
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

    /** Booked seats per slot start of a calendar in [from, to). */
    async bookedCounts(accountId: string, calendarId: string, from: Date, to: Date, tx: Executor = db) {
      const rows = await tx
        .selectFrom('appointments')
        .select(['starts_at', (eb) => eb.fn.countAll<string>().as('n')])
        .where('account_id', '=', accountId)
        .where('calendar_id', '=', calendarId)
        .where('status', '=', 'booked')
        .where('starts_at', '>=', from)
        .where('starts_at', '<', to)
        .groupBy('starts_at')
        .execute();
      return new Map(rows.map((row) => [row.starts_at.getTime(), Number(row.n)]));
    },

    /**
     * Takes the lowest free seat below `capacity` of one slot, or none. The unique index over
     * (calendar, start, seat) of booked appointments decides: an insert that meets a seat taken
     * (or being taken by a transaction not yet committed, which it waits for) does nothing, and
     * the next seat is tried.
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
      for (let seat = 0; seat < capacity; seat++) {
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
            seat,
          })
          .onConflict((oc) => oc.doNothing())
          .returning(APPOINTMENT_COLUMNS)
          .executeTakeFirst();
        if (row) return row;
      }
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
        const at = new Date(after.createdAt);
        query = query.where((eb) =>
          eb.or([eb('starts_at', '>', at), eb.and([eb('starts_at', '=', at), eb('id', '>', after.id)])]),
        );
      }
      return query.orderBy('starts_at').orderBy('id').limit(limit).execute();
    },

    /** Cancels a booked appointment (its seat is free again); undefined when it was not booked. */
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
        durationMinutes: number;
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

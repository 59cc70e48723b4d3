import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestAccount, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';
import { createCalendar, intakeBooking, publicBook, recordWithLink, testClock } from './support.ts';

// Monday 2027-03-22, 06:00 UTC; the calendars below are in UTC and open 09:00–12:00 on Mondays.
const clock = testClock('2027-03-22T06:00:00Z');
const CALENDARS = '/api/v1/settings/booking/calendars';
const NINE = '2027-03-22T09:00:00Z';
const HALF_PAST_NINE = '2027-03-22T09:30:00Z';

/** A Monday-morning calendar in UTC without notice. */
function mornings(settings: { slot_minutes: number; capacity: number; buffer_minutes?: number }) {
  return {
    name: 'Group session',
    time_zone: 'UTC',
    min_notice_minutes: 0,
    weekly: { mon: [['09:00', '12:00']] },
    ...settings,
  };
}

describe.each(TEST_DATABASES)(
  'capacity counts overlapping appointments, whatever the grid, on %s',
  (kind) => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp(kind, { now: clock.now, concurrentCreates: 4 });
    });
    afterAll(async () => t?.close());

    let emails = 0;
    async function book(account: TestAccount, startsAt: string) {
      const response = await intakeBooking(t, account, `p${emails++}@example.com`, startsAt);
      expect(response.statusCode).toBe(201);
      const body = response.json();
      return {
        appointmentId: body.booking.appointment_id as string | undefined,
        warnings: body.warnings as { reason: string }[],
      };
    }

    async function change(account: TestAccount, id: string, body: object) {
      const response = await t.request({
        method: 'PATCH',
        url: `${CALENDARS}/${id}`,
        key: account.apiKey,
        body,
      });
      expect(response.statusCode).toBe(200);
    }

    async function offered(account: TestAccount) {
      const link = await recordWithLink(t, account, `look${emails++}@example.com`);
      const response = await t.request({
        method: 'GET',
        url: `/api/v1/booking/slots?token=${link.token}&from=2027-03-22&to=2027-03-23`,
      });
      expect(response.statusCode).toBe(200);
      return (response.json().slots as { starts_at: string }[]).map((slot) => slot.starts_at);
    }

    /** The most booked appointments of an account at one minute (the database's view). */
    async function mostAtOnce(accountId: string) {
      const rows = await t.db
        .selectFrom('appointments')
        .select(['starts_at', 'ends_at'])
        .where('account_id', '=', accountId)
        .where('status', '=', 'booked')
        .execute();
      let most = 0;
      for (const { starts_at } of rows) {
        const at = starts_at.getTime();
        const count = rows.filter(
          (row) => row.starts_at.getTime() <= at && at < row.ends_at.getTime(),
        ).length;
        most = Math.max(most, count);
      }
      return most;
    }

    describe('happy path', () => {
      it('keeps a full hour full after the slots shrink to 30 minutes, and books the free half hours', async () => {
        const account = await accountWithLeads(t, { modules: ['booking'] });
        const calendar = await createCalendar(t, account, mornings({ slot_minutes: 60, capacity: 2 }));
        expect((await book(account, NINE)).appointmentId).toBeDefined();
        expect((await book(account, NINE)).appointmentId).toBeDefined();
        await change(account, calendar.id, { slot_minutes: 30 });
        const free = await offered(account);
        expect(free).not.toContain('2027-03-22T09:00:00.000Z');
        expect(free).not.toContain('2027-03-22T09:30:00.000Z');
        expect(free).toContain('2027-03-22T10:00:00.000Z');
        const refused = await book(account, HALF_PAST_NINE);
        expect(refused.appointmentId).toBeUndefined();
        expect(refused.warnings.map((warning) => warning.reason)).toEqual(['slot_taken']);
        expect((await book(account, '2027-03-22T10:00:00Z')).appointmentId).toBeDefined();
        expect(await mostAtOnce(account.id)).toBe(2);
      });

      it('frees the overlapped slots when an appointment is cancelled', async () => {
        const account = await accountWithLeads(t, { modules: ['booking'] });
        const calendar = await createCalendar(t, account, mornings({ slot_minutes: 60, capacity: 1 }));
        const first = await book(account, NINE);
        await change(account, calendar.id, { slot_minutes: 30 });
        expect((await book(account, HALF_PAST_NINE)).appointmentId).toBeUndefined();
        const cancelled = await t.request({
          method: 'POST',
          url: `/api/v1/booking/appointments/${first.appointmentId}/cancel`,
          key: account.apiKey,
        });
        expect(cancelled.statusCode).toBe(200);
        expect(await offered(account)).toContain('2027-03-22T09:30:00.000Z');
        expect((await book(account, HALF_PAST_NINE)).appointmentId).toBeDefined();
      });
    });

    describe('errors', () => {
      it('refuses a slot of a new buffer that overlaps a full appointment', async () => {
        const account = await accountWithLeads(t, { modules: ['booking'] });
        const calendar = await createCalendar(t, account, mornings({ slot_minutes: 30, capacity: 1 }));
        expect((await book(account, HALF_PAST_NINE)).appointmentId).toBeDefined();
        // Slots now start at 09:00, 09:45, 10:30, …: 09:45–10:15 overlaps 09:30–10:00.
        await change(account, calendar.id, { buffer_minutes: 15 });
        const free = await offered(account);
        expect(free).toContain('2027-03-22T09:00:00.000Z');
        expect(free).not.toContain('2027-03-22T09:45:00.000Z');
        expect(free).toContain('2027-03-22T10:30:00.000Z');
        const refused = await book(account, '2027-03-22T09:45:00Z');
        expect(refused.warnings.map((warning) => warning.reason)).toEqual(['slot_taken']);
        const link = await recordWithLink(t, account, 'public@example.com');
        const viaLink = await publicBook(t, link.token, '2027-03-22T09:45:00Z');
        expect(viaLink.statusCode).toBe(409);
        expect(viaLink.json().error).toBe('slot_taken');
        expect((await book(account, NINE)).appointmentId).toBeDefined();
        expect(await mostAtOnce(account.id)).toBe(1);
      });

      it('keeps a lowered capacity when the appointment on the lowest seat is cancelled', async () => {
        const account = await accountWithLeads(t, { modules: ['booking'] });
        const calendar = await createCalendar(t, account, mornings({ slot_minutes: 60, capacity: 2 }));
        const first = await book(account, NINE);
        expect((await book(account, NINE)).appointmentId).toBeDefined();
        await change(account, calendar.id, { capacity: 1 });
        await t.request({
          method: 'POST',
          url: `/api/v1/booking/appointments/${first.appointmentId}/cancel`,
          key: account.apiKey,
        });
        // One appointment is left at 09:00: with capacity 1 the hour is full.
        expect(await offered(account)).not.toContain('2027-03-22T09:00:00.000Z');
        expect((await book(account, NINE)).appointmentId).toBeUndefined();
        expect(await mostAtOnce(account.id)).toBe(1);
      });
    });

    describe('concurrency', () => {
      it('admits one booking per half hour next to an older hour-long appointment, of 20 at once', async () => {
        const account = await accountWithLeads(t, { modules: ['booking'] });
        const calendar = await createCalendar(t, account, mornings({ slot_minutes: 60, capacity: 2 }));
        expect((await book(account, NINE)).appointmentId).toBeDefined();
        await change(account, calendar.id, { slot_minutes: 30 });
        const answers = await Promise.all(
          Array.from({ length: 20 }, (_, index) => book(account, index % 2 === 0 ? NINE : HALF_PAST_NINE)),
        );
        expect(answers.filter((answer) => answer.appointmentId)).toHaveLength(2);
        expect(await mostAtOnce(account.id)).toBe(2);
        const rows = await t.db
          .selectFrom('appointments')
          .select('starts_at')
          .where('account_id', '=', account.id)
          .where('status', '=', 'booked')
          .orderBy('starts_at')
          .execute();
        expect(rows.map((row) => row.starts_at.toISOString())).toEqual([
          '2027-03-22T09:00:00.000Z',
          '2027-03-22T09:00:00.000Z',
          '2027-03-22T09:30:00.000Z',
        ]);
      });
    });
  },
);

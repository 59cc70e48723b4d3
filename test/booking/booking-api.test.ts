import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, historyOf } from '../helpers/fixtures.ts';
import {
  appointmentCount,
  BERLIN_CALENDAR,
  bookingAccount,
  createCalendar,
  emailsOf,
  publicBook,
  recordWithLink,
  setModules,
  testClock,
} from './support.ts';

// Monday 2027-03-22, 07:00 in Berlin.
const clock = testClock('2027-03-22T06:00:00Z');
const CALENDARS = '/api/v1/settings/booking/calendars';

describe.each(TEST_DATABASES)('booking settings, public JSON and appointments on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind, { now: clock.now });
  });
  afterAll(async () => t?.close());

  describe('happy path', () => {
    it('creates, lists, reads, changes and deletes calendars; the first is the default', async () => {
      const account = await accountWithLeads(t, { modules: ['booking'] });
      const first = await t.request({
        method: 'POST',
        url: CALENDARS,
        key: account.apiKey,
        body: BERLIN_CALENDAR,
      });
      expect(first.statusCode).toBe(201);
      expect(first.json()).toMatchObject({
        name: 'Consultation',
        time_zone: 'Europe/Berlin',
        slot_minutes: 30,
        buffer_minutes: 0,
        min_notice_minutes: 60,
        horizon_days: 30,
        capacity: 1,
        weekly: { mon: [['09:00', '12:00']], sat: [], sun: [] },
        exceptions: [],
        default: true,
      });
      const second = await createCalendar(t, account, {
        name: 'Evenings',
        time_zone: 'America/New_York',
        weekly: { tue: [['18:00', '20:00']] },
        exceptions: [{ date: '2027-12-24', hours: [] }],
      });
      expect(second.default).toBe(false);
      const promoted = await t.request({
        method: 'PATCH',
        url: `${CALENDARS}/${second.id}`,
        key: account.apiKey,
        body: { default: true, buffer_minutes: 10, name: 'Late' },
      });
      expect(promoted.statusCode).toBe(200);
      expect(promoted.json()).toMatchObject({
        default: true,
        buffer_minutes: 10,
        name: 'Late',
        time_zone: 'America/New_York',
      });
      const list = await t.request({ method: 'GET', url: `${CALENDARS}?limit=1`, key: account.apiKey });
      expect(list.json().calendars).toHaveLength(1);
      expect(list.json().calendars[0].default).toBe(false);
      const rest = await t.request({
        method: 'GET',
        url: `${CALENDARS}?cursor=${list.json().next_cursor}`,
        key: account.apiKey,
      });
      expect(rest.json().calendars.map((c: { id: string }) => c.id)).toEqual([second.id]);
      const removed = await t.request({
        method: 'DELETE',
        url: `${CALENDARS}/${second.id}`,
        key: account.apiKey,
      });
      expect(removed.statusCode).toBe(204);
      // The default moves to the one left.
      const left = await t.request({
        method: 'GET',
        url: `${CALENDARS}/${first.json().id}`,
        key: account.apiKey,
      });
      expect(left.json().default).toBe(true);
    });

    it('stores a zone as the time zone database spells it, and an alias or Etc zone as written', async () => {
      const account = await accountWithLeads(t, { modules: ['booking'] });
      const zoneOf = async (timeZone: string) => {
        const response = await t.request({
          method: 'POST',
          url: CALENDARS,
          key: account.apiKey,
          body: { ...BERLIN_CALENDAR, time_zone: timeZone },
        });
        expect(response.statusCode, timeZone).toBe(201);
        return response.json() as { id: string; time_zone: string };
      };
      expect((await zoneOf('europe/berlin')).time_zone).toBe('Europe/Berlin');
      expect((await zoneOf('AMERICA/NEW_YORK')).time_zone).toBe('America/New_York');
      expect((await zoneOf('utc')).time_zone).toBe('UTC');
      // Aliases stay as written: the runtime's name for them is another (Asia/Calcutta, Europe/Kiev).
      expect((await zoneOf('Asia/Kolkata')).time_zone).toBe('Asia/Kolkata');
      expect((await zoneOf('Europe/Kyiv')).time_zone).toBe('Europe/Kyiv');
      // Etc/GMT-1 is a zone of the database: UTC+01:00 all year (the sign is POSIX's, reversed).
      const fixed = await zoneOf('Etc/GMT-1');
      expect(fixed.time_zone).toBe('Etc/GMT-1');
      const changed = await t.request({
        method: 'PATCH',
        url: `${CALENDARS}/${fixed.id}`,
        key: account.apiKey,
        body: { time_zone: 'europe/london' },
      });
      expect(changed.statusCode).toBe(200);
      expect(changed.json().time_zone).toBe('Europe/London');
    });

    it('books a link for the calendar’s slot length as it is now, and at most that long', async () => {
      const account = await accountWithLeads(t, { modules: ['booking'] });
      const calendar = await createCalendar(t, account, { ...BERLIN_CALENDAR, slot_minutes: 60 });
      const slotsOf = async (token: string) => {
        const response = await t.request({
          method: 'GET',
          url: `/api/v1/booking/slots?token=${token}&from=2027-03-23&to=2027-03-24`,
        });
        expect(response.statusCode, response.body).toBe(200);
        return response.json() as {
          duration_minutes: number;
          slots: { starts_at: string; ends_at: string }[];
        };
      };
      const slotMinutes = async (minutes: number) => {
        const response = await t.request({
          method: 'PATCH',
          url: `${CALENDARS}/${calendar.id}`,
          key: account.apiKey,
          body: { slot_minutes: minutes },
        });
        expect(response.statusCode).toBe(200);
      };
      // A link without a duration, and one that asked for 45 minutes.
      const plain = await recordWithLink(t, account);
      const asked = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: { entity: 'lead', fields: { email: 'asked@example.com' }, booking: { duration_minutes: 45 } },
      });
      const askedToken = asked.json().booking.token as string;
      expect((await slotsOf(plain.token)).duration_minutes).toBe(60);
      expect((await slotsOf(askedToken)).duration_minutes).toBe(45);

      await slotMinutes(15);
      const shorter = await slotsOf(plain.token);
      expect(shorter.duration_minutes).toBe(15);
      expect(shorter.slots[1]).toEqual({
        starts_at: '2027-03-23T08:15:00.000Z',
        ends_at: '2027-03-23T08:30:00.000Z',
      });
      expect((await slotsOf(askedToken)).duration_minutes).toBe(15);
      const booked = await publicBook(t, plain.token, '2027-03-23T08:15:00Z');
      expect(booked.statusCode).toBe(201);
      expect(booked.json().ends_at).toBe('2027-03-23T08:30:00.000Z');
      // Its neighbour slots stay free: the appointment took one 15-minute slot, not four.
      const free = (await slotsOf(askedToken)).slots.map((slot) => slot.starts_at);
      expect(free).toContain('2027-03-23T08:30:00.000Z');
      expect(free).not.toContain('2027-03-23T08:15:00.000Z');

      // Longer slots: the asked 45 minutes stay 45; a link without a duration follows.
      await slotMinutes(90);
      expect((await slotsOf(askedToken)).duration_minutes).toBe(45);
      const other = await recordWithLink(t, account, 'other@example.com');
      await slotMinutes(60);
      expect((await slotsOf(other.token)).duration_minutes).toBe(60);
      const page = await t.app.inject({ method: 'GET', url: `/book/${other.token}` });
      expect(page.body).toContain('Consultation · 60 minutes');
      await slotMinutes(90);
      expect((await slotsOf(other.token)).duration_minutes).toBe(90);
      // 10:30 in Berlin, the second 90-minute slot (the first overlaps the appointment above).
      const long = await publicBook(t, askedToken, '2027-03-23T09:30:00Z');
      expect(long.statusCode, long.body).toBe(201);
      expect(long.json().ends_at).toBe('2027-03-23T10:15:00.000Z');
    });

    it('lists the free slots of a link and books one; the link then answers already_booked', async () => {
      const { account } = await bookingAccount(t);
      const link = await recordWithLink(t, account);
      const slots = await t.request({
        method: 'GET',
        url: `/api/v1/booking/slots?token=${link.token}&from=2027-03-22&to=2027-03-24`,
      });
      expect(slots.statusCode).toBe(200);
      const body = slots.json();
      expect(body.time_zone).toBe('Europe/Berlin');
      expect(body.duration_minutes).toBe(30);
      // Monday from 09:00 (08:00Z, 60 minutes' notice after 07:00) and all of Tuesday morning.
      expect(body.slots[0]).toEqual({
        starts_at: '2027-03-22T08:00:00.000Z',
        ends_at: '2027-03-22T08:30:00.000Z',
      });
      expect(body.slots).toHaveLength(12);
      const booked = await t.request({
        method: 'POST',
        url: '/api/v1/booking/book',
        body: { token: link.token, starts_at: body.slots[1].starts_at },
      });
      expect(booked.statusCode).toBe(201);
      expect(booked.json()).toEqual({
        appointment_id: expect.any(String),
        starts_at: '2027-03-22T08:30:00.000Z',
        ends_at: '2027-03-22T09:00:00.000Z',
      });
      expect(await historyOf(t, account.apiKey, link.recordId)).toContain('appointment_booked');
      // The history entry names the booking's request, as one by key or intake does.
      const history = await t.request({
        method: 'GET',
        url: `/api/v1/records/${link.recordId}/history`,
        key: account.apiKey,
      });
      const entry = history.json().events.find((e: { type: string }) => e.type === 'appointment_booked');
      expect(entry.data.request_id).toBe(booked.headers['x-request-id']);
      const again = await t.request({
        method: 'POST',
        url: '/api/v1/booking/book',
        body: { token: link.token, starts_at: body.slots[2].starts_at },
      });
      expect(again.statusCode).toBe(409);
      expect(again.json().error).toBe('already_booked');
      const slotsAgain = await t.request({ method: 'GET', url: `/api/v1/booking/slots?token=${link.token}` });
      expect(slotsAgain.json().error).toBe('already_booked');
      // The booked slot is gone from another link's list.
      const other = await recordWithLink(t, account, 'other@example.com');
      const otherSlots = await t.request({
        method: 'GET',
        url: `/api/v1/booking/slots?token=${other.token}&from=2027-03-22&to=2027-03-23`,
      });
      expect(otherSlots.json().slots.map((s: { starts_at: string }) => s.starts_at)).not.toContain(
        '2027-03-22T08:30:00.000Z',
      );
    });

    it('lists appointments with filters and a cursor, reads and cancels one (twice is a no-op)', async () => {
      const { account, calendar } = await bookingAccount(t);
      const ids: string[] = [];
      for (const [index, startsAt] of [
        '2027-03-23T09:00:00Z',
        '2027-03-22T09:00:00Z',
        '2027-03-24T09:00:00Z',
      ].entries()) {
        const response = await t.request({
          method: 'POST',
          url: '/api/v1/records',
          key: account.apiKey,
          body: {
            entity: 'lead',
            fields: { email: `a${index}@example.com` },
            booking: { starts_at: startsAt },
          },
        });
        ids.push(response.json().booking.appointment_id);
      }
      const page = await t.request({
        method: 'GET',
        url: '/api/v1/booking/appointments?limit=2',
        key: account.apiKey,
      });
      expect(page.json().appointments.map((a: { id: string }) => a.id)).toEqual([ids[1], ids[0]]);
      const next = await t.request({
        method: 'GET',
        url: `/api/v1/booking/appointments?limit=2&cursor=${page.json().next_cursor}`,
        key: account.apiKey,
      });
      expect(next.json().appointments.map((a: { id: string }) => a.id)).toEqual([ids[2]]);
      expect(next.json().next_cursor).toBeNull();
      const filtered = await t.request({
        method: 'GET',
        url: `/api/v1/booking/appointments?from=2027-03-23T00:00:00Z&to=2027-03-24T00:00:00Z&calendar_id=${calendar.id}`,
        key: account.apiKey,
      });
      expect(filtered.json().appointments.map((a: { id: string }) => a.id)).toEqual([ids[0]]);
      // The same window with offsets whose + went unescaped (decoded as spaces).
      const unescaped = await t.request({
        method: 'GET',
        url: `/api/v1/booking/appointments?from=2027-03-23T01:00:00+01:00&to=2027-03-24T01:00:00+01:00&calendar_id=${calendar.id}`,
        key: account.apiKey,
      });
      expect(unescaped.statusCode, unescaped.body).toBe(200);
      expect(unescaped.json().appointments.map((a: { id: string }) => a.id)).toEqual([ids[0]]);
      // Dates, as the slots take them: each its midnight UTC, `to` exclusive.
      const byDate = await t.request({
        method: 'GET',
        url: `/api/v1/booking/appointments?from=2027-03-23&to=2027-03-24&calendar_id=${calendar.id}`,
        key: account.apiKey,
      });
      expect(byDate.statusCode, byDate.body).toBe(200);
      expect(byDate.json().appointments.map((a: { id: string }) => a.id)).toEqual([ids[0]]);
      const one = await t.request({
        method: 'GET',
        url: `/api/v1/booking/appointments/${ids[0]}`,
        key: account.apiKey,
      });
      const byRecord = await t.request({
        method: 'GET',
        url: `/api/v1/booking/appointments?record_id=${one.json().record_id}`,
        key: account.apiKey,
      });
      expect(byRecord.json().appointments).toHaveLength(1);

      const cancelled = await t.request({
        method: 'POST',
        url: `/api/v1/booking/appointments/${ids[0]}/cancel`,
        key: account.apiKey,
        body: { reason: 'Customer asked' },
      });
      expect(cancelled.statusCode).toBe(200);
      expect(cancelled.json()).toMatchObject({ id: ids[0], status: 'cancelled' });
      expect(await historyOf(t, account.apiKey, one.json().record_id)).toContain('appointment_cancelled');
      // `reason` is optional, so the body may be left out: no body, no content type.
      const twice = await t.request({
        method: 'POST',
        url: `/api/v1/booking/appointments/${ids[0]}/cancel`,
        key: account.apiKey,
      });
      expect(twice.statusCode).toBe(200);
      expect(twice.json().status).toBe('cancelled');
      const unknown = await t.request({
        method: 'POST',
        url: '/api/v1/booking/appointments/00000000-0000-4000-8000-000000000000/cancel',
        key: account.apiKey,
      });
      expect(unknown.statusCode).toBe(404);
      const emails = await emailsOf(t, account.id);
      expect(emails.filter((email) => email.event_type === 'booking.cancellation')).toHaveLength(1);
      // The seat is free again: the slot can be booked.
      const rebooked = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: {
          entity: 'lead',
          fields: { email: 'again@example.com' },
          booking: { starts_at: '2027-03-23T09:00:00Z' },
        },
      });
      expect(rebooked.json().booking.appointment_id).toBeDefined();
    });
  });

  describe('errors', () => {
    it('refuses calendars with an unknown zone, overlapping or reversed hours, bad dates', async () => {
      const account = await accountWithLeads(t, { modules: ['booking'] });
      const refused = async (body: object) => {
        const response = await t.request({ method: 'POST', url: CALENDARS, key: account.apiKey, body });
        expect(response.statusCode, JSON.stringify(body)).toBe(422);
        return response.json().details.map((d: { key: string; reason: string }) => `${d.key}:${d.reason}`);
      };
      // Bare offsets are no IANA zone, though Intl takes some of them; nor are UTC+1 and GMT+1.
      for (const timeZone of [
        'Mars/Olympus',
        '+01:00',
        '+0100',
        '-05:30',
        'UTC+1',
        'GMT+1',
        'Etc/GMT+14',
        ' UTC',
      ]) {
        expect(await refused({ ...BERLIN_CALENDAR, time_zone: timeZone })).toEqual([
          'time_zone:invalid_time_zone',
        ]);
      }
      expect(await refused({ ...BERLIN_CALENDAR, weekly: { mon: [['12:00', '09:00']] } })).toEqual([
        'weekly.mon.0:invalid_range',
      ]);
      expect(
        await refused({
          ...BERLIN_CALENDAR,
          weekly: {
            mon: [
              ['09:00', '12:00'],
              ['11:00', '13:00'],
            ],
          },
        }),
      ).toEqual(['weekly.mon:overlapping']);
      expect(await refused({ ...BERLIN_CALENDAR, exceptions: [{ date: '2027-02-30', hours: [] }] })).toEqual([
        'exceptions.0.date:invalid_format',
      ]);
      expect(await refused({ ...BERLIN_CALENDAR, weekly: { mon: [['9:00', '12:00']] } })).toHaveLength(1);
      expect(await refused({ ...BERLIN_CALENDAR, weekly: { someday: [] } })).toHaveLength(1);
      expect(await refused({ ...BERLIN_CALENDAR, capacity: 0 })).toHaveLength(1);
      const list = await t.request({ method: 'GET', url: CALENDARS, key: account.apiKey });
      expect(list.json().calendars).toEqual([]);
    });

    it('refuses a bare offset as the zone of a changed calendar, and keeps the zone it had', async () => {
      const { account, calendar } = await bookingAccount(t);
      for (const timeZone of ['+01:00', 'UTC+1', 'GMT+1']) {
        const response = await t.request({
          method: 'PATCH',
          url: `${CALENDARS}/${calendar.id}`,
          key: account.apiKey,
          body: { time_zone: timeZone, name: 'Changed' },
        });
        expect(response.statusCode, timeZone).toBe(422);
        expect(response.json().details).toEqual([
          { key: 'time_zone', reason: 'invalid_time_zone', message: expect.any(String) },
        ]);
      }
      const kept = await t.request({
        method: 'GET',
        url: `${CALENDARS}/${calendar.id}`,
        key: account.apiKey,
      });
      expect(kept.json()).toMatchObject({ time_zone: 'Europe/Berlin', name: 'Consultation' });
    });

    it('keeps the default: false on the default calendar is refused', async () => {
      const { account, calendar } = await bookingAccount(t);
      const response = await t.request({
        method: 'PATCH',
        url: `${CALENDARS}/${calendar.id}`,
        key: account.apiKey,
        body: { default: false },
      });
      expect(response.statusCode).toBe(422);
      expect(response.json().details[0].reason).toBe('default_required');
    });

    it('refuses to delete a calendar with booked appointments ahead (409)', async () => {
      const { account, calendar } = await bookingAccount(t);
      await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: {
          entity: 'lead',
          fields: { email: 'x@example.com' },
          booking: { starts_at: '2027-03-23T09:00:00Z' },
        },
      });
      const response = await t.request({
        method: 'DELETE',
        url: `${CALENDARS}/${calendar.id}`,
        key: account.apiKey,
      });
      expect(response.statusCode).toBe(409);
      expect(response.json().error).toBe('conflict');
    });

    it('answers the public JSON for unknown (404), expired (410) and taken slots (409), and bad times (422)', async () => {
      const { account } = await bookingAccount(t);
      const link = await recordWithLink(t, account);
      const unknown = await t.request({ method: 'GET', url: '/api/v1/booking/slots?token=bk_unknown0000' });
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json().error).toBe('not_found');
      const offGrid = await t.request({
        method: 'POST',
        url: '/api/v1/booking/book',
        body: { token: link.token, starts_at: '2027-03-22T08:10:00Z' },
      });
      expect(offGrid.statusCode).toBe(409);
      expect(offGrid.json().error).toBe('slot_taken');
      const unreadable = await t.request({
        method: 'POST',
        url: '/api/v1/booking/book',
        body: { token: link.token, starts_at: 'soon' },
      });
      expect(unreadable.statusCode).toBe(422);
      // Impossible offsets and parts are unreadable, not another day: without the bound,
      // +24:00 read 2027-03-23T10:00 as Monday 10:00Z, a free slot.
      for (const startsAt of [
        '2027-03-23T10:00:00+24:00',
        '2027-03-23T10:00:00+23:60',
        '2027-03-27T12:00:00+99:00',
        '2027-03-21T10:00:00-24:00',
        '2027-03-22T10:00:00+2400',
        '2027-13-22T10:00:00Z',
        '2027-03-32T10:00:00Z',
        '2027-02-29T10:00:00Z',
        '2027-03-22T25:00:00Z',
        '2027-03-21T24:00:00+01:00',
        '2027-03-22T10:60:00Z',
        '2027-03-22T10:00:60Z',
      ]) {
        const response = await publicBook(t, link.token, startsAt);
        expect(response.statusCode, startsAt).toBe(422);
        expect(response.json().details).toEqual([
          { key: 'starts_at', reason: 'invalid_starts_at', message: expect.any(String) },
        ]);
      }
      expect(await appointmentCount(t, account.id)).toBe(0);
      // The slot listing's bounds and the appointment filters read times the same way.
      for (const query of [
        'from=2027-03-23T10:00:00%2B24:00',
        'to=2027-03-22T24:00:00Z',
        'from=2027-02-30',
      ]) {
        const response = await t.request({
          method: 'GET',
          url: `/api/v1/booking/slots?token=${link.token}&${query}`,
        });
        expect(response.statusCode, query).toBe(422);
      }
      // A leap second passes the schema's date-time but names no time Date can read (was 500).
      for (const query of [
        'from=2027-03-23T10:00:00%2B24:00',
        'to=2027-03-22T10:00:00-23:60',
        'from=2027-12-31T23:59:60Z',
        'to=0000-01-01T00:00:00Z',
        'from=2027-02-30',
        'to=0000-01-01',
      ]) {
        const response = await t.request({
          method: 'GET',
          url: `/api/v1/booking/appointments?${query}`,
          key: account.apiKey,
        });
        expect(response.statusCode, query).toBe(422);
      }
      // A reversed range is invalid_range on both lists (the appointments answered 200 empty);
      // an empty one (from = to) is an empty page.
      const reversed = [
        `/api/v1/booking/slots?token=${link.token}&from=2027-03-24&to=2027-03-23`,
        '/api/v1/booking/appointments?from=2027-01-01&to=2026-01-01',
        '/api/v1/booking/appointments?from=2027-01-01T00:00:00%2B01:00&to=2026-12-31T22:59:59Z',
      ];
      for (const url of reversed) {
        const response = await t.request({ method: 'GET', url, key: account.apiKey });
        expect(response.statusCode, url).toBe(422);
        expect(response.json().details, url).toEqual([
          { key: 'to', reason: 'invalid_range', message: expect.any(String) },
        ]);
      }
      const empty = await t.request({
        method: 'GET',
        url: '/api/v1/booking/appointments?from=2027-01-01&to=2027-01-01',
        key: account.apiKey,
      });
      expect(empty.statusCode).toBe(200);
      expect(empty.json().appointments).toEqual([]);
      // An unreadable bound says what the filter takes (was not_allowed, "must match a schema in anyOf").
      for (const [query, taken] of [
        ['from=garbage', 'a date (YYYY-MM-DD) or a date-time with an offset'],
        ['to=2027-13-01', 'a date (YYYY-MM-DD) or a date-time with an offset'],
        ['from=2027-01-04T08:00:00', 'a date-time with an offset'],
      ]) {
        const response = await t.request({
          method: 'GET',
          url: `/api/v1/booking/appointments?${query}`,
          key: account.apiKey,
        });
        expect(response.statusCode, query).toBe(422);
        expect(response.json().details, query).toEqual([
          { key: query!.split('=')[0], reason: 'invalid_format', message: expect.stringContaining(taken!) },
        ]);
      }
      const wide = await t.request({
        method: 'GET',
        url: `/api/v1/booking/slots?token=${link.token}&from=2027-03-22&to=2027-06-01`,
      });
      expect(wide.statusCode).toBe(422);
      clock.advance(15 * 86_400_000);
      try {
        const expired = await t.request({ method: 'GET', url: `/api/v1/booking/slots?token=${link.token}` });
        expect(expired.statusCode).toBe(410);
        expect(expired.json().error).toBe('token_expired');
        const book = await t.request({
          method: 'POST',
          url: '/api/v1/booking/book',
          body: { token: link.token, starts_at: '2027-04-07T08:00:00Z' },
        });
        expect(book.statusCode).toBe(410);
      } finally {
        clock.advance(-15 * 86_400_000);
      }
    });
  });

  describe('security', () => {
    it('needs an API key: 401 without, for settings and appointments', async () => {
      for (const url of [CALENDARS, '/api/v1/booking/appointments']) {
        const response = await t.request({ method: 'GET', url });
        expect(response.statusCode).toBe(401);
      }
    });

    it('answers 403 module_not_enabled without the booking module', async () => {
      const account = await accountWithLeads(t, { modules: ['crm'] });
      for (const url of [CALENDARS, '/api/v1/booking/appointments']) {
        const response = await t.request({ method: 'GET', url, key: account.apiKey });
        expect(response.statusCode).toBe(403);
        expect(response.json().error).toBe('module_not_enabled');
      }
    });

    it('answers 403 module_not_enabled on the public JSON once the account lost the module', async () => {
      const { account } = await bookingAccount(t);
      const link = await recordWithLink(t, account);
      const slot = '2027-03-22T09:00:00Z';
      const before = await t.request({ method: 'GET', url: `/api/v1/booking/slots?token=${link.token}` });
      expect(before.statusCode).toBe(200);
      await setModules(t, account.id, ['crm', 'distribution']);
      const slots = await t.request({
        method: 'GET',
        url: `/api/v1/booking/slots?token=${link.token}&from=2027-03-22&to=2027-03-24`,
      });
      expect(slots.statusCode).toBe(403);
      expect(slots.json().error).toBe('module_not_enabled');
      const book = await publicBook(t, link.token, slot);
      expect(book.statusCode).toBe(403);
      expect(book.json().error).toBe('module_not_enabled');
      expect(await appointmentCount(t, account.id)).toBe(0);
      const messages = await t.db
        .selectFrom('outbound_messages')
        .select('id')
        .where('account_id', '=', account.id)
        .execute();
      expect(messages).toHaveLength(0);
      // An unknown token stays 404: the module is checked once the link is found.
      const unknown = await t.request({ method: 'GET', url: '/api/v1/booking/slots?token=bk_unknown0000' });
      expect(unknown.statusCode).toBe(404);
      // With the module back, the link books again.
      await setModules(t, account.id, ['booking']);
      expect((await publicBook(t, link.token, slot)).statusCode).toBe(201);
    });

    it('needs the settings permission for calendars and the booking permission for appointments', async () => {
      const { account } = await bookingAccount(t);
      const keyFor = async (permissions: string[]) =>
        (
          await t.request({
            method: 'POST',
            url: '/api/v1/settings/api-keys',
            key: account.apiKey,
            body: { name: permissions.join(' '), permissions },
          })
        ).json().key as string;
      const bookingOnly = await keyFor(['booking']);
      const settingsOnly = await keyFor(['settings']);
      expect((await t.request({ method: 'GET', url: CALENDARS, key: bookingOnly })).statusCode).toBe(403);
      expect((await t.request({ method: 'GET', url: CALENDARS, key: settingsOnly })).statusCode).toBe(200);
      const appointments = '/api/v1/booking/appointments';
      expect((await t.request({ method: 'GET', url: appointments, key: settingsOnly })).json().error).toBe(
        'forbidden',
      );
      expect((await t.request({ method: 'GET', url: appointments, key: bookingOnly })).statusCode).toBe(200);
    });

    it('answers 404 for another account’s calendar and appointment', async () => {
      const mine = await bookingAccount(t);
      const theirs = await bookingAccount(t);
      const booked = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: theirs.account.apiKey,
        body: {
          entity: 'lead',
          fields: { email: 't@example.com' },
          booking: { starts_at: '2027-03-23T09:00:00Z' },
        },
      });
      const appointmentId = booked.json().booking.appointment_id;
      const key = mine.account.apiKey;
      const calendarUrl = `${CALENDARS}/${theirs.calendar.id}`;
      expect((await t.request({ method: 'GET', url: calendarUrl, key })).statusCode).toBe(404);
      expect(
        (await t.request({ method: 'PATCH', url: calendarUrl, key, body: { name: 'x' } })).statusCode,
      ).toBe(404);
      expect((await t.request({ method: 'DELETE', url: calendarUrl, key })).statusCode).toBe(404);
      const appointmentUrl = `/api/v1/booking/appointments/${appointmentId}`;
      expect((await t.request({ method: 'GET', url: appointmentUrl, key })).statusCode).toBe(404);
      expect(
        (await t.request({ method: 'POST', url: `${appointmentUrl}/cancel`, key, body: {} })).statusCode,
      ).toBe(404);
      const list = await t.request({ method: 'GET', url: '/api/v1/booking/appointments', key });
      expect(list.json().appointments).toEqual([]);
      // Their calendar is not mine to book through intake.
      const intake = await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key,
        body: {
          entity: 'lead',
          fields: { email: 'm@example.com' },
          booking: { calendar_id: theirs.calendar.id },
        },
      });
      expect(intake.json().warnings[0].reason).toBe('no_calendar');
    });

    it('takes no API key as a booking token, nor a source token', async () => {
      const { account } = await bookingAccount(t);
      const response = await t.request({
        method: 'GET',
        url: `/api/v1/booking/slots?token=${encodeURIComponent(account.apiKey)}`,
      });
      expect(response.statusCode).toBe(404);
    });

    describe('per-address limit of the public surface', () => {
      let limited: TestApp;
      beforeAll(async () => {
        limited = await startTestApp(kind, { now: clock.now, bookingRateLimitPerMinute: 3 });
      });
      afterAll(async () => limited?.close());

      it('answers 429 rate_limited with Retry-After once an address used its minute, JSON and page alike', async () => {
        const { account } = await bookingAccount(limited);
        const link = await recordWithLink(limited, account);
        const visitor = '198.51.100.7';
        const slots = (remoteAddress = visitor) =>
          limited.request({ method: 'GET', url: `/api/v1/booking/slots?token=${link.token}`, remoteAddress });
        expect((await slots()).statusCode).toBe(200);
        // The page is no part of the OpenAPI document: asked for as a browser does, without the checker.
        const page = await limited.app.inject({
          method: 'GET',
          url: `/book/${link.token}`,
          remoteAddress: visitor,
        });
        expect(page.statusCode).toBe(200);
        // Unknown tokens count too: the limit is the address's, across every link.
        const unknown = await limited.request({
          method: 'POST',
          url: '/api/v1/booking/book',
          body: { token: 'bk_doesnotexist0000', starts_at: '2027-03-22T08:00:00Z' },
          remoteAddress: visitor,
        });
        expect(unknown.statusCode).toBe(404);

        const refused = await slots();
        expect(refused.statusCode).toBe(429);
        expect(refused.json().error).toBe('rate_limited');
        expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
        expect(refused.headers['ratelimit-limit']).toBe('3');
        const book = await limited.request({
          method: 'POST',
          url: '/api/v1/booking/book',
          body: { token: link.token, starts_at: '2027-03-22T08:00:00Z' },
          remoteAddress: visitor,
        });
        expect(book.statusCode).toBe(429);
        expect(await appointmentCount(limited, account.id)).toBe(0);
        const refusedPage = await limited.app.inject({
          method: 'GET',
          url: `/book/${link.token}`,
          remoteAddress: visitor,
        });
        expect(refusedPage.statusCode).toBe(429);
        expect(refusedPage.headers['content-type']).toContain('text/html');
        expect(refusedPage.headers['retry-after']).toBeDefined();
        expect(refusedPage.body).toContain('Too many requests');
        expect(refusedPage.body).toMatch(/Please try again in (a second|\d+ seconds)\./);
        const refusedPost = await limited.app.inject({
          method: 'POST',
          url: `/book/${link.token}`,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: 'starts_at=2027-03-22T08%3A00%3A00Z',
          remoteAddress: visitor,
        });
        expect(refusedPost.statusCode).toBe(429);
        expect(await appointmentCount(limited, account.id)).toBe(0);

        // Another address is not held back, nor is the account's API with its key.
        expect((await slots('198.51.100.8')).statusCode).toBe(200);
        const appointments = await limited.request({
          method: 'GET',
          url: '/api/v1/booking/appointments',
          key: account.apiKey,
          remoteAddress: visitor,
        });
        expect(appointments.statusCode).toBe(200);
      });
    });
  });
});

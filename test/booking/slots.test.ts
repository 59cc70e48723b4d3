import { describe, expect, it } from 'vitest';
import type { CalendarRules } from '../../src/modules/booking/booking.rules.ts';
import { gridSlots, isOffered, readStartsAt } from '../../src/modules/booking/booking.slots.ts';

/** Weekdays 09:00–12:00 in Berlin, 30-minute slots, nothing else. */
function berlin(overrides: Partial<CalendarRules> = {}): CalendarRules {
  const morning: [string, string][] = [['09:00', '12:00']];
  return {
    timeZone: 'Europe/Berlin',
    slotMinutes: 30,
    bufferMinutes: 0,
    minNoticeMinutes: 0,
    horizonDays: 365,
    weekly: { mon: morning, tue: morning, wed: morning, thu: morning, fri: morning },
    exceptions: [],
    ...overrides,
  };
}

const at = (iso: string) => new Date(iso);
const starts = (slots: { startsAt: Date }[]) => slots.map((slot) => slot.startsAt.toISOString());
/** Slots of one UTC day, seen a month before. */
const day = (rules: CalendarRules, date: string, now = new Date(Date.parse(date) - 30 * 86_400_000)) =>
  gridSlots(rules, at(`${date}T00:00:00Z`), at(`${date}T23:59:59Z`), now);

describe('slot maths', () => {
  describe('happy path', () => {
    it('steps through each opening window in slot lengths, in the calendar’s zone', () => {
      // Monday 2026-03-23, Berlin on CET (UTC+1).
      expect(starts(day(berlin(), '2026-03-23'))).toEqual([
        '2026-03-23T08:00:00.000Z',
        '2026-03-23T08:30:00.000Z',
        '2026-03-23T09:00:00.000Z',
        '2026-03-23T09:30:00.000Z',
        '2026-03-23T10:00:00.000Z',
        '2026-03-23T10:30:00.000Z',
      ]);
      expect(day(berlin(), '2026-03-22')).toEqual([]); // Sunday: closed
    });

    it('keeps 09:00 wall-clock time across the spring change (Europe/Berlin, 2027-03-28)', () => {
      const rules = berlin();
      // Friday before: CET, 09:00 = 08:00Z. Monday after: CEST, 09:00 = 07:00Z.
      expect(starts(day(rules, '2027-03-26'))[0]).toBe('2027-03-26T08:00:00.000Z');
      expect(starts(day(rules, '2027-03-29'))[0]).toBe('2027-03-29T07:00:00.000Z');
      expect(day(rules, '2027-03-29')).toHaveLength(6);
    });

    it('keeps 09:00 wall-clock time across the autumn change (Europe/Berlin, 2027-10-31)', () => {
      const rules = berlin();
      expect(starts(day(rules, '2027-10-29'))[0]).toBe('2027-10-29T07:00:00.000Z');
      expect(starts(day(rules, '2027-11-01'))[0]).toBe('2027-11-01T08:00:00.000Z');
      expect(day(rules, '2027-11-01')).toHaveLength(6);
    });

    it('counts real time in a window that spans the change: 01:00–04:00 is 2 hours in spring, 4 in autumn', () => {
      const night: [string, string][] = [['01:00', '04:00']];
      const rules = berlin({ slotMinutes: 60, weekly: { sun: night } });
      const spring = gridSlots(
        rules,
        at('2027-03-27T12:00:00Z'),
        at('2027-03-28T12:00:00Z'),
        at('2027-01-01T00:00:00Z'),
      );
      // 01:00 CET and 03:00 CEST: the hour 02:00–03:00 does not exist that night.
      expect(starts(spring)).toEqual(['2027-03-28T00:00:00.000Z', '2027-03-28T01:00:00.000Z']);
      const autumn = gridSlots(
        rules,
        at('2027-10-30T12:00:00Z'),
        at('2027-10-31T12:00:00Z'),
        at('2027-01-01T00:00:00Z'),
      );
      // 01:00 CEST, 02:00 CEST, 02:00 CET, 03:00 CET: the hour 02:00–03:00 happens twice.
      expect(starts(autumn)).toEqual([
        '2027-10-30T23:00:00.000Z',
        '2027-10-31T00:00:00.000Z',
        '2027-10-31T01:00:00.000Z',
        '2027-10-31T02:00:00.000Z',
      ]);
    });

    it('closes a window whose end the clock skips at the jump (Europe/Berlin, 2027-03-28)', () => {
      // 01:00–02:30: 02:30 does not exist that night; the window ends where the clock jumps,
      // 02:00 CET = 03:00 CEST, so 01:00 and 01:30 CET and nothing at 03:00 CEST or later.
      const rules = berlin({ exceptions: [{ date: '2027-03-28', hours: [['01:00', '02:30']] }] });
      const now = at('2027-01-01T00:00:00Z');
      const night = gridSlots(rules, at('2027-03-27T12:00:00Z'), at('2027-03-28T12:00:00Z'), now);
      expect(starts(night)).toEqual(['2027-03-28T00:00:00.000Z', '2027-03-28T00:30:00.000Z']);
      expect(isOffered(rules, at('2027-03-28T01:00:00Z'), now)).toBe(false); // 03:00 CEST
    });

    it('opens a window whose start the clock skips at the jump (America/New_York, 2027-03-14)', () => {
      // 02:30–05:00: 02:30 does not exist; the window opens at the jump, 03:00 EDT (07:00Z),
      // so its wall-clock hours 03:00–05:00 are all offered (not from 03:30 on).
      const rules = berlin({
        timeZone: 'America/New_York',
        exceptions: [{ date: '2027-03-14', hours: [['02:30', '05:00']] }],
      });
      const now = at('2027-01-01T00:00:00Z');
      const night = gridSlots(rules, at('2027-03-14T00:00:00Z'), at('2027-03-14T23:00:00Z'), now);
      expect(starts(night)).toEqual([
        '2027-03-14T07:00:00.000Z',
        '2027-03-14T07:30:00.000Z',
        '2027-03-14T08:00:00.000Z',
        '2027-03-14T08:30:00.000Z',
      ]);
      // The same in Berlin: 02:30–04:00 opens at 03:00 CEST (01:00Z).
      const berlinNight = berlin({ exceptions: [{ date: '2027-03-28', hours: [['02:30', '04:00']] }] });
      expect(
        starts(gridSlots(berlinNight, at('2027-03-27T12:00:00Z'), at('2027-03-28T12:00:00Z'), now)),
      ).toEqual(['2027-03-28T01:00:00.000Z', '2027-03-28T01:30:00.000Z']);
      // A window inside the gap holds nothing; a jump of half an hour (Australia/Lord_Howe,
      // 02:00 → 02:30 on 2027-10-03) and one at midnight (America/Santiago, 00:00 → 01:00 on
      // 2027-09-05) follow the same rule.
      const inGap = berlin({ exceptions: [{ date: '2027-03-28', hours: [['02:00', '02:45']] }] });
      expect(gridSlots(inGap, at('2027-03-27T12:00:00Z'), at('2027-03-28T12:00:00Z'), now)).toEqual([]);
      const lordHowe = berlin({
        timeZone: 'Australia/Lord_Howe',
        exceptions: [{ date: '2027-10-03', hours: [['01:30', '02:15']] }],
      });
      // 01:30 (+10:30) = 15:00Z; 02:15 is skipped: the window ends at the jump, 15:30Z.
      expect(
        starts(gridSlots(lordHowe, at('2027-10-02T00:00:00Z'), at('2027-10-03T12:00:00Z'), now)),
      ).toEqual(['2027-10-02T15:00:00.000Z']);
      const santiago = berlin({
        timeZone: 'America/Santiago',
        exceptions: [{ date: '2027-09-05', hours: [['00:00', '02:00']] }],
      });
      // 00:00 is skipped: the window opens at 01:00 (−03) = 04:00Z and ends at 02:00 = 05:00Z.
      expect(
        starts(gridSlots(santiago, at('2027-09-05T00:00:00Z'), at('2027-09-05T12:00:00Z'), now)),
      ).toEqual(['2027-09-05T04:00:00.000Z', '2027-09-05T04:30:00.000Z']);
    });

    it('leaves the buffer after each slot, and a slot must end inside its window', () => {
      const rules = berlin({ bufferMinutes: 15, weekly: { mon: [['09:00', '11:00']] } });
      expect(starts(day(rules, '2026-03-23'))).toEqual([
        '2026-03-23T08:00:00.000Z',
        '2026-03-23T08:45:00.000Z',
        '2026-03-23T09:30:00.000Z',
      ]);
    });

    it('offers nothing inside the minimum notice', () => {
      const rules = berlin({ minNoticeMinutes: 60 });
      // Now is Monday 09:10 Berlin: the first slot that may be booked starts at 10:30.
      const slots = day(rules, '2026-03-23', at('2026-03-23T08:10:00Z'));
      expect(starts(slots)).toEqual([
        '2026-03-23T09:30:00.000Z',
        '2026-03-23T10:00:00.000Z',
        '2026-03-23T10:30:00.000Z',
      ]);
    });

    it('offers nothing beyond the horizon', () => {
      const rules = berlin({ horizonDays: 2 });
      const now = at('2026-03-23T07:00:00Z');
      const slots = gridSlots(rules, now, at('2026-04-30T00:00:00Z'), now);
      const days = new Set(starts(slots).map((start) => start.slice(0, 10)));
      expect([...days]).toEqual(['2026-03-23', '2026-03-24']);
      expect(starts(slots).every((start) => Date.parse(start) <= now.getTime() + 2 * 86_400_000)).toBe(true);
    });

    it('lets an exception close a date or give it other hours', () => {
      const rules = berlin({
        exceptions: [
          { date: '2026-03-23', hours: [] },
          { date: '2026-03-22', hours: [['10:00', '11:00']] },
        ],
      });
      expect(day(rules, '2026-03-23')).toEqual([]);
      expect(starts(day(rules, '2026-03-22'))).toEqual([
        '2026-03-22T09:00:00.000Z',
        '2026-03-22T09:30:00.000Z',
      ]);
    });

    it('ends a day at 24:00 and computes zones far from UTC', () => {
      const rules = berlin({
        timeZone: 'Pacific/Auckland',
        slotMinutes: 60,
        weekly: { mon: [['22:00', '24:00']] },
      });
      // Monday 2026-03-23 22:00 in Auckland (UTC+13) is 09:00Z the same date.
      expect(starts(day(rules, '2026-03-23'))).toEqual([
        '2026-03-23T09:00:00.000Z',
        '2026-03-23T10:00:00.000Z',
      ]);
    });

    it('tells an offered start from one off the grid or past the notice', () => {
      const rules = berlin({ minNoticeMinutes: 60 });
      const now = at('2026-03-23T06:00:00Z');
      expect(isOffered(rules, at('2026-03-23T08:30:00Z'), now)).toBe(true);
      expect(isOffered(rules, at('2026-03-23T08:15:00Z'), now)).toBe(false);
      expect(isOffered(rules, at('2026-03-23T11:00:00Z'), now)).toBe(false);
      expect(isOffered(rules, at('2026-03-23T08:30:00Z'), at('2026-03-23T08:00:00Z'))).toBe(false);
    });
  });

  describe('errors', () => {
    it('reads only ISO 8601 times with an offset', () => {
      expect(readStartsAt('2026-03-23T09:00:00+01:00')?.toISOString()).toBe('2026-03-23T08:00:00.000Z');
      expect(readStartsAt('2026-03-23T08:00:00.000Z')?.toISOString()).toBe('2026-03-23T08:00:00.000Z');
      for (const bad of [
        'tomorrow',
        '2026-03-23T09:00:00',
        '2026-02-30T09:00:00Z',
        '2026-03-23',
        '',
        5,
        null,
      ]) {
        expect(readStartsAt(bad), String(bad)).toBeNull();
      }
    });
  });
});

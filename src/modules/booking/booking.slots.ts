import { DateTime } from 'luxon';
import {
  bookableRange,
  type CalendarRules,
  type Hours,
  MINUTE_MS,
  minutesOf,
  type Slot,
  seatMinutes,
  WEEKDAYS,
} from './booking.rules.ts';

/**
 * The slot grid of a calendar (decisions §11), computed in the calendar's own wall-clock time
 * with Luxon: 09:00 in Europe/Berlin is 09:00 on both sides of a daylight-saving change. Each
 * opening window of a day is turned into two instants (its start and end on that date in the
 * calendar's zone), and slots step through it in real minutes: a slot starts every
 * `slot_minutes + buffer_minutes` from the window's start and must end inside the window.
 *
 * Luxon is loaded with this module, which the booking service and page load on their first call
 * (about 1 MB of heap that a service without bookings never needs); the calendar's rules, which
 * every start reads, are in booking.rules.ts.
 */

/**
 * The instant of a wall-clock time on a date in a zone; "24:00" is the next day's midnight. A
 * time the clock skips that night (02:30 when it jumps from 02:00 to 03:00) is the jump itself,
 * the first instant whose clock shows that time or later: a window opening at 02:30 opens at
 * 03:00 and one closing at 02:30 closes at 03:00 (= 02:00 before the jump), so that no slot
 * falls outside the window's wall-clock hours (decisions §11). Luxon alone reads such a time
 * with the offset before the jump, a whole gap later (03:30), which offered slots after a
 * window's closing time and dropped as much of its start.
 */
function instantOf(date: DateTime, hourMinute: string): DateTime {
  if (hourMinute === '24:00') return date.plus({ days: 1 }).startOf('day');
  const minutes = minutesOf(hourMinute);
  const hour = Math.floor(minutes / 60);
  const minute = minutes % 60;
  const local = date.set({ hour, minute, second: 0, millisecond: 0 });
  if (local.hour === hour && local.minute === minute) return local;
  // In the gap: `local` is the asked time read with the offset before the jump, so the jump
  // lies less than the gap's length (how far the clock moved on) before it.
  const wallOf = (time: DateTime) => Date.UTC(time.year, time.month - 1, time.day, time.hour, time.minute);
  const gap = wallOf(local) - Date.UTC(date.year, date.month - 1, date.day) - minutes * MINUTE_MS;
  const after = local.offset;
  let before = local.toMillis() - gap; // still the offset before the jump
  let at = local.toMillis(); // the offset after it
  while (at - before > 1) {
    const middle = Math.floor((before + at) / 2);
    if (local.zone.offset(middle) === after) at = middle;
    else before = middle;
  }
  return DateTime.fromMillis(at, { zone: local.zone });
}

/** The opening hours of one local date: its exception when there is one, else its weekday's. */
export function hoursOn(rules: CalendarRules, date: DateTime): Hours {
  const iso = date.toISODate();
  const exception = rules.exceptions.find((item) => item.date === iso);
  if (exception) return exception.hours;
  return rules.weekly[WEEKDAYS[date.weekday - 1]!] ?? [];
}

/**
 * Every slot of the grid that starts in [from, to) and may be booked at `now`, in start order;
 * how many are taken is the caller's business (the database's, in the end).
 */
export function gridSlots(rules: CalendarRules, from: Date, to: Date, now: Date): Slot[] {
  const { earliest, latest } = bookableRange(rules, now);
  const lower = Math.max(from.getTime(), earliest);
  const upper = Math.min(to.getTime(), latest + 1);
  if (lower >= upper) return [];
  const step = (rules.slotMinutes + rules.bufferMinutes) * MINUTE_MS;
  const length = rules.slotMinutes * MINUTE_MS;
  const slots: Slot[] = [];
  // Local dates from the day before the range to the day after: a window of a neighbouring
  // date can reach into the range in another zone.
  let day = DateTime.fromMillis(lower, { zone: rules.timeZone }).startOf('day').minus({ days: 1 });
  const lastDay = DateTime.fromMillis(upper, { zone: rules.timeZone }).startOf('day').plus({ days: 1 });
  while (day <= lastDay) {
    for (const [open, close] of hoursOn(rules, day)) {
      const windowStart = instantOf(day, open).toMillis();
      const windowEnd = instantOf(day, close).toMillis();
      for (let start = windowStart; start + length <= windowEnd; start += step) {
        if (start >= lower && start < upper) {
          slots.push({ startsAt: new Date(start), endsAt: new Date(start + length) });
        }
      }
    }
    day = day.plus({ days: 1 }).startOf('day');
  }
  slots.sort((a, b) => a.startsAt.getTime() - b.startsAt.getTime());
  return slots.filter(
    (slot, index) => index === 0 || slot.startsAt.getTime() !== slots[index - 1]!.startsAt.getTime(),
  );
}

/** Whether `startsAt` is a slot of the grid that may be booked at `now`. */
export function isOffered(rules: CalendarRules, startsAt: Date, now: Date): boolean {
  const found = gridSlots(rules, startsAt, new Date(startsAt.getTime() + 1), now);
  return found.length === 1 && found[0]!.startsAt.getTime() === startsAt.getTime();
}

/**
 * A date-time as RFC 3339 writes it (the seconds may be left out): month 01–12, day 01–31, hour
 * 00–23, minute and second 00–59, and an offset `Z` or ±hh:mm (or ±hhmm) within ±23:59. Luxon
 * alone reads any two digits as the offset's hours and minutes (`+99:00`, `+24:00`, `+23:60`
 * named instants days away) and hour 24 as the next day's midnight.
 */
const DATE_TIME =
  /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d{1,9})?)?(Z|[+-]([01]\d|2[0-3]):?[0-5]\d)$/i;

/**
 * Reads a client's `starts_at`: an ISO 8601 date-time with an offset or `Z` (a time without
 * one would name no instant). Null when it cannot be read: another form, an impossible part
 * (above), or a day its month lacks (Luxon refuses 2027-02-30 rather than rolling it over).
 */
export function readStartsAt(value: unknown): Date | null {
  if (typeof value !== 'string' || value.length > 64) return null;
  const text = value.trim();
  if (!DATE_TIME.test(text)) return null;
  const parsed = DateTime.fromISO(text, { setZone: true });
  return parsed.isValid ? parsed.toJSDate() : null;
}

/**
 * The most booked appointments at one moment of [startsAt, endsAt), in whole minutes as their
 * seats are held (decisions §11: capacity counts overlap, whatever grid the appointments were
 * booked on). The most are found at the start or where an appointment starts.
 */
export function mostAtOnce(
  booked: readonly { starts_at: Date; ends_at: Date }[],
  startsAt: Date,
  endsAt: Date,
): number {
  const { first, last } = seatMinutes(startsAt, endsAt);
  const overlapping = booked
    .map((row) => seatMinutes(row.starts_at, row.ends_at))
    .filter((row) => row.first <= last && row.last >= first);
  let most = 0;
  for (const point of [first, ...overlapping.map((row) => row.first).filter((from) => from > first)]) {
    const count = overlapping.filter((row) => row.first <= point && point <= row.last).length;
    if (count > most) most = count;
  }
  return most;
}

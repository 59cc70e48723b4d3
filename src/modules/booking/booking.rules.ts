/**
 * A calendar's rules as stored and checked (decisions §11): weekdays, opening hours, zone. No
 * Luxon here: these are read by every start (the request schemas) and by calendar settings, and
 * the slot grid that needs Luxon (booking.slots.ts) is loaded only when slots are asked for.
 */

export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Weekday = (typeof WEEKDAYS)[number];
export type Hours = [string, string][];

export interface CalendarRules {
  timeZone: string;
  slotMinutes: number;
  bufferMinutes: number;
  minNoticeMinutes: number;
  horizonDays: number;
  weekly: Partial<Record<Weekday, Hours>>;
  exceptions: { date: string; hours: Hours }[];
}

export interface Slot {
  startsAt: Date;
  endsAt: Date;
}

export const MINUTE_MS = 60_000;

/**
 * The minutes (since 1970 UTC) a time span covers, first and last: an appointment's seat rows
 * (appointment_seats), and what capacity counts when slots are offered.
 */
export function seatMinutes(startsAt: Date, endsAt: Date): { first: number; last: number } {
  return {
    first: Math.floor(startsAt.getTime() / MINUTE_MS),
    last: Math.ceil(endsAt.getTime() / MINUTE_MS) - 1,
  };
}
const HOUR_MINUTE = /^([01]\d|2[0-3]):[0-5]\d$|^24:00$/;

/** Whether the runtime knows the IANA zone: the same test as Luxon's `IANAZone.isValidZone`. */
export function isValidTimeZone(zone: string): boolean {
  if (!zone) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone }).format();
    return true;
  } catch {
    return false;
  }
}

export function isHourMinute(value: string): boolean {
  return HOUR_MINUTE.test(value);
}

/** Minutes since midnight of "HH:MM" ("24:00" is the end of the day). */
export function minutesOf(value: string): number {
  const [hours, minutes] = value.split(':').map(Number);
  return hours! * 60 + minutes!;
}

/** The earliest and latest start a booking may have at `now` (minimum notice, horizon). */
export function bookableRange(rules: CalendarRules, now: Date): { earliest: number; latest: number } {
  return {
    earliest: now.getTime() + rules.minNoticeMinutes * MINUTE_MS,
    latest: now.getTime() + rules.horizonDays * 86_400_000,
  };
}

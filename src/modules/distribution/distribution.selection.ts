import type { ParticipationSchedule, RuleFilter } from '../../db/types.ts';

/**
 * The pure parts of a run's selection (decisions §8, docs/decisions.md "Distribution runs"):
 * rule filters over record values, schedules and cap periods in a participation's time zone,
 * and the order in which a strategy tries the eligible participations. The run
 * (distribution.service.ts) does the locking and the counting in the database.
 */

export const STRATEGIES = ['all', 'round_robin', 'weighted', 'cheapest', 'priciest'] as const;
export type Strategy = (typeof STRATEGIES)[number];

/** A value as compared by `equals` and `in`: numbers as numbers, text trimmed and lower-cased. */
function comparable(value: unknown): number | string | boolean | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'number' || typeof value === 'boolean') return value;
  const text = String(value).trim();
  if (text === '') return null;
  const number = Number(text);
  return Number.isFinite(number) && /^[-+]?\d/.test(text) ? number : text.toLowerCase();
}

/** Whether a record's value equals a filter's value, as `equals` and `in` compare them. */
export function sameValue(recordValue: unknown, wanted: unknown): boolean {
  const a = comparable(recordValue);
  const b = comparable(wanted);
  if (a === null || b === null) return false;
  if (typeof a === 'boolean' || typeof b === 'boolean') return String(a) === String(b).toLowerCase();
  return a === b;
}

/** The record's values of a field: a multiselect's items each, any other value alone. */
function valuesOf(value: unknown): unknown[] {
  if (value === null || value === undefined || value === '') return [];
  return Array.isArray(value) ? value : [value];
}

/** `min ≤ value ≤ max`: numerically when both are numbers, else as text (ISO dates and times sort as text). */
function inRange(value: unknown, min: unknown, max: unknown): boolean {
  const v = comparable(value);
  if (v === null || typeof v === 'boolean') return false;
  const within = (bound: unknown, below: boolean) => {
    const b = comparable(bound);
    if (b === null || typeof b === 'boolean') return true;
    if (typeof v === 'number' && typeof b === 'number') return below ? b <= v : v <= b;
    const [x, y] = [String(value).trim(), String(bound).trim()];
    return below ? y <= x : x <= y;
  };
  return within(min, true) && within(max, false);
}

/** Whether some value can lie in `min`…`max` as `inRange` compares (a bound it ignores counts as open). */
export function rangeCanHold(min: unknown, max: unknown): boolean {
  const low = comparable(min);
  const high = comparable(max);
  if (low === null || high === null || typeof low === 'boolean' || typeof high === 'boolean') return true;
  return inRange(max, min, max);
}

function normalisedPostalCode(value: unknown): string {
  return String(value).replace(/\s+/g, '').toUpperCase();
}

/** Whether one condition holds for the record's values; a field without a value matches nothing. */
export function conditionHolds(condition: RuleFilter, fields: Record<string, unknown>): boolean {
  const values = valuesOf(fields[condition.field]);
  if (values.length === 0) return false;
  switch (condition.op) {
    case 'equals':
      return values.some((value) => sameValue(value, condition.value));
    case 'in':
      return values.some((value) => (condition.values ?? []).some((wanted) => sameValue(value, wanted)));
    case 'range':
      return values.some((value) => inRange(value, condition.min, condition.max));
    case 'postal_prefix': {
      const prefix = normalisedPostalCode(condition.prefix ?? '');
      return values.some((value) => normalisedPostalCode(value).startsWith(prefix));
    }
    default:
      return false;
  }
}

/** Every condition of a rule's filter holds (an empty filter matches every record). */
export function filterMatches(filter: RuleFilter[], fields: Record<string, unknown>): boolean {
  return filter.every((condition) => conditionHolds(condition, fields));
}

/** Local calendar parts of an instant in a time zone, through Intl (no hand-made offsets). */
export function localParts(at: Date, timeZone: string) {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    weekday: 'short',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  }).formatToParts(at);
  const part = (type: string) => parts.find((p) => p.type === type)?.value ?? '';
  const weekday = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'].indexOf(part('weekday')) + 1;
  return {
    date: `${part('year')}-${part('month')}-${part('day')}`,
    month: `${part('year')}-${part('month')}`,
    /** 1 = Monday … 7 = Sunday. */
    weekday,
    minutes: Number(part('hour')) * 60 + Number(part('minute')),
  };
}

function minutesOf(hhmm: string): number {
  const [hours, minutes] = hhmm.split(':').map(Number);
  return (hours ?? 0) * 60 + (minutes ?? 0);
}

/**
 * Whether a participation takes records at `at`: no schedule means always. Otherwise the local
 * weekday (in the schedule's zone) must be listed and the local time inside `from`–`to` (`from`
 * included, `to` excluded). A window with `to` before `from` runs over midnight and belongs to
 * the weekday it starts on; `from` equal to `to` is the whole day.
 */
export function inSchedule(schedule: ParticipationSchedule | null, at: Date): boolean {
  if (!schedule) return true;
  const local = localParts(at, schedule.time_zone);
  const from = minutesOf(schedule.from);
  const to = minutesOf(schedule.to);
  if (from === to) return schedule.weekdays.includes(local.weekday);
  if (from < to)
    return schedule.weekdays.includes(local.weekday) && local.minutes >= from && local.minutes < to;
  if (local.minutes >= from) return schedule.weekdays.includes(local.weekday);
  // Past midnight: the window started on the day before.
  const yesterday = local.weekday === 1 ? 7 : local.weekday - 1;
  return local.minutes < to && schedule.weekdays.includes(yesterday);
}

/** The cap periods a delivery at `at` counts in: the local day and month of the schedule's zone, else UTC. */
export function capPeriods(schedule: ParticipationSchedule | null, at: Date) {
  const local = localParts(at, schedule?.time_zone ?? 'UTC');
  return { day: `day:${local.date}`, month: `month:${local.month}` };
}

export interface Candidate {
  id: string;
  /** Place in the rule's list of participations. */
  position: number;
  priceCents: number;
  weight: number;
  currentWeight: number;
}

/**
 * The order in which a strategy tries the eligible participations; the run takes them in this
 * order until `max_partners` have a free cap. `cursor` is the rule's round-robin cursor and
 * `size` the length of its participation list.
 */
export function strategyOrder(strategy: Strategy, candidates: Candidate[], cursor: number, size: number) {
  const byPosition = [...candidates].sort((a, b) => a.position - b.position);
  // Turn order from the cursor: the participation at the cursor first, then those after it.
  const turn = (c: Candidate) => (c.position - (cursor % Math.max(size, 1)) + size) % Math.max(size, 1);
  switch (strategy) {
    case 'all':
      return byPosition;
    case 'round_robin':
      return byPosition.sort((a, b) => turn(a) - turn(b));
    case 'cheapest':
      return byPosition.sort((a, b) => a.priceCents - b.priceCents || turn(a) - turn(b));
    case 'priciest':
      return byPosition.sort((a, b) => b.priceCents - a.priceCents || turn(a) - turn(b));
    case 'weighted':
      // Smooth weighted round robin: everyone gains its weight, the highest goes first (the
      // run then takes the total from each one it chose).
      return byPosition
        .map((c) => ({ ...c, currentWeight: c.currentWeight + c.weight }))
        .sort((a, b) => b.currentWeight - a.currentWeight || a.position - b.position);
    default:
      return byPosition;
  }
}

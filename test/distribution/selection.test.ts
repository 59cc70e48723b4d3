import { describe, expect, it } from 'vitest';
import {
  capPeriods,
  conditionHolds,
  filterMatches,
  inSchedule,
  strategyOrder,
} from '../../src/modules/distribution/distribution.selection.ts';

const weekdays = { time_zone: 'Europe/Berlin', weekdays: [1, 2, 3, 4, 5], from: '08:00', to: '18:00' };

describe('schedules in the participation time zone', () => {
  it('opens on local weekdays and hours, across the zone boundary from UTC', () => {
    // Friday 23:30 UTC is Saturday 00:30 in Berlin (winter, UTC+1): closed there.
    expect(inSchedule(weekdays, new Date('2026-01-09T23:30:00Z'))).toBe(false);
    expect(inSchedule({ ...weekdays, time_zone: 'UTC', to: '24:00' }, new Date('2026-01-09T23:30:00Z'))).toBe(
      true,
    );
    // Monday 07:30 UTC is 08:30 in Berlin: open; 17:00 UTC is 18:00 there: closed (`to` excluded).
    expect(inSchedule(weekdays, new Date('2026-01-12T07:30:00Z'))).toBe(true);
    expect(inSchedule(weekdays, new Date('2026-01-12T17:00:00Z'))).toBe(false);
    expect(inSchedule(null, new Date('2026-01-10T03:00:00Z'))).toBe(true);
  });

  it('follows the wall clock across daylight-saving changes', () => {
    // Berlin moves to summer time on 2026-03-29; 08:00 local is 07:00 UTC before, 06:00 UTC after.
    expect(inSchedule(weekdays, new Date('2026-03-27T06:30:00Z'))).toBe(false);
    expect(inSchedule(weekdays, new Date('2026-03-30T06:30:00Z'))).toBe(true);
    expect(capPeriods(weekdays, new Date('2026-03-31T22:30:00Z'))).toEqual({
      day: 'day:2026-04-01',
      month: 'month:2026-04',
    });
    expect(capPeriods(null, new Date('2026-03-31T22:30:00Z'))).toEqual({
      day: 'day:2026-03-31',
      month: 'month:2026-03',
    });
  });

  it('runs a window over midnight on the weekday it starts', () => {
    const nights = { time_zone: 'America/New_York', weekdays: [5], from: '22:00', to: '06:00' };
    // Friday 23:00 and Saturday 05:00 in New York belong to Friday's night; Saturday 23:00 does not.
    expect(inSchedule(nights, new Date('2026-01-10T04:00:00Z'))).toBe(true);
    expect(inSchedule(nights, new Date('2026-01-10T10:00:00Z'))).toBe(true);
    expect(inSchedule(nights, new Date('2026-01-10T11:00:00Z'))).toBe(false);
    expect(inSchedule(nights, new Date('2026-01-11T04:00:00Z'))).toBe(false);
  });
});

describe('rule filters', () => {
  const fields = {
    interest: 'Heat pump',
    budget: 15000,
    zip: '20 457',
    topics: ['Price', 'Funding'],
    consent: true,
  };
  it('compares text without case, numbers as numbers, lists item by item', () => {
    expect(conditionHolds({ field: 'interest', op: 'equals', value: ' heat PUMP ' }, fields)).toBe(true);
    expect(conditionHolds({ field: 'budget', op: 'equals', value: '15000.0' }, fields)).toBe(true);
    expect(conditionHolds({ field: 'consent', op: 'equals', value: 'true' }, fields)).toBe(true);
    expect(conditionHolds({ field: 'topics', op: 'in', values: ['funding'] }, fields)).toBe(true);
    expect(conditionHolds({ field: 'topics', op: 'equals', value: 'Installation' }, fields)).toBe(false);
    expect(conditionHolds({ field: 'missing', op: 'equals', value: '' }, fields)).toBe(false);
  });

  it('takes ranges with either bound, numerically or as ISO text, and postal prefixes without spaces', () => {
    expect(conditionHolds({ field: 'budget', op: 'range', min: 15000 }, fields)).toBe(true);
    expect(conditionHolds({ field: 'budget', op: 'range', max: '9999' }, fields)).toBe(false);
    expect(
      conditionHolds(
        { field: 'day', op: 'range', min: '2026-01-01', max: '2026-12-31' },
        { day: '2026-05-01' },
      ),
    ).toBe(true);
    expect(conditionHolds({ field: 'zip', op: 'postal_prefix', prefix: '204' }, fields)).toBe(true);
    expect(conditionHolds({ field: 'zip', op: 'postal_prefix', prefix: '21' }, fields)).toBe(false);
    expect(filterMatches([], fields)).toBe(true);
    expect(
      filterMatches(
        [
          { field: 'interest', op: 'equals', value: 'Heat pump' },
          { field: 'budget', op: 'range', min: 20000 },
        ],
        fields,
      ),
    ).toBe(false);
  });
});

describe('strategy order', () => {
  const candidates = [
    { id: 'a', position: 0, priceCents: 300, weight: 1, currentWeight: 0 },
    { id: 'b', position: 1, priceCents: 100, weight: 1, currentWeight: 0 },
    { id: 'c', position: 2, priceCents: 100, weight: 1, currentWeight: 0 },
  ];
  const ids = (list: { id: string }[]) => list.map((c) => c.id).join('');
  it('rotates round robin and the ties of cheapest from the cursor', () => {
    expect(ids(strategyOrder('round_robin', candidates, 2, 3))).toBe('cab');
    expect(ids(strategyOrder('cheapest', candidates, 0, 3))).toBe('bca');
    expect(ids(strategyOrder('cheapest', candidates, 2, 3))).toBe('cba');
    expect(ids(strategyOrder('priciest', candidates, 0, 3))).toBe('abc');
    expect(ids(strategyOrder('all', candidates, 1, 3))).toBe('abc');
  });
});

import type { DateTime } from 'luxon';

/**
 * A local time as `HH:mm`, with the zone's short name (`02:30 CEST`, `02:30 CET`) when the clock
 * shows that time twice that night (the hour repeated when daylight saving time ends), so that
 * the two are told apart. `booking.js` labels slots the same way.
 */
export function clockTime(local: DateTime): string {
  const time = local.toFormat('HH:mm');
  const repeated = [30, 60].some(
    (minutes) =>
      local.minus({ minutes }).toFormat('HH:mm') === time ||
      local.plus({ minutes }).toFormat('HH:mm') === time,
  );
  return repeated ? `${time} ${local.toFormat('ZZZZ')}` : time;
}

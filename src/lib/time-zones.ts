/** A zone name of the time zone database: letters first, then letters, digits, `_`, `+`, `-`, `/`. */
const ZONE_NAME = /^[A-Za-z][A-Za-z0-9_+/-]*$/;

/**
 * A zone as it is stored (a calendar's, a distribution schedule's), or null when `zone` is no
 * IANA zone name (docs/decisions.md, Booking: calendar time zones). `Intl` also takes a bare offset (`+01:00`, `-0530`), which is
 * no zone of the database and has no daylight-saving rules, so only a name is read; `UTC+1` and
 * `GMT+1` are no names `Intl` knows. A name is stored as the runtime spells it when that is the
 * same name in another letter case (`europe/berlin` → `Europe/Berlin`); an alias whose runtime
 * name is another one (`Asia/Kolkata` → `Asia/Calcutta`, `CET` → `Europe/Brussels`) is stored
 * as written: the same rules, but the name the person chose.
 */
export function zoneName(zone: string): string | null {
  if (!ZONE_NAME.test(zone)) return null;
  let resolved: string;
  try {
    resolved = new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
  if (!ZONE_NAME.test(resolved)) return null;
  return resolved.toLowerCase() === zone.toLowerCase() ? resolved : zone;
}

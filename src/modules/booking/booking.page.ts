import { DateTime } from 'luxon';
import { htmlDocument } from '../../lib/html.ts';
import { escapeHtml } from '../../lib/text.ts';
import { clockTime } from './booking.clock.ts';
import { isValidTimeZone } from './booking.rules.ts';

/**
 * The public booking page (decisions §11): server-rendered HTML that works without JavaScript
 * (a time-zone form, week links, a plain form post) and that `booking.js` enhances (slots
 * fetched without reloading, the browser's zone preselected).
 */

/** Headers of every page answer: only the page's own script and style, no referrer (the token is in the address). */
export const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-store, private',
} as const;

const LOCALE = 'en-GB';
let zones: string[] | null = null;

/** Every IANA zone the runtime knows, for the time-zone select. */
export function timeZones(): string[] {
  zones ??= Intl.supportedValuesOf('timeZone');
  return zones;
}

/** The visitor's zone from the query when it is a real one, else the calendar's. */
export function visitorZone(asked: unknown, calendarZone: string): { zone: string; chosen: boolean } {
  if (typeof asked === 'string' && asked.length <= 64 && isValidTimeZone(asked))
    return { zone: asked, chosen: true };
  return { zone: calendarZone, chosen: false };
}

/** The start of the visitor's local today. */
export function startOfToday(zone: string, now: Date): DateTime {
  return DateTime.fromJSDate(now, { zone }).startOf('day');
}

/** The first local day shown: the asked week start (not before today), else today, in the visitor's zone. */
export function weekStart(asked: unknown, zone: string, now: Date): DateTime {
  const today = startOfToday(zone, now);
  if (typeof asked !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(asked)) return today;
  const day = DateTime.fromISO(asked, { zone });
  if (!day.isValid || day < today) return today;
  return day.startOf('day');
}

export function whenIn(startsAt: Date, endsAt: Date, zone: string): string {
  const start = DateTime.fromJSDate(startsAt, { zone }).setLocale(LOCALE);
  const end = DateTime.fromJSDate(endsAt, { zone }).setLocale(LOCALE);
  return `${start.toFormat('cccc d LLLL yyyy')}, ${clockTime(start)}–${clockTime(end)}`;
}

function layout(title: string, body: string, script = false, language: PageLanguage = 'en'): string {
  return htmlDocument({
    language,
    title,
    head: `<link rel="stylesheet" href="/book/assets/booking.css">
${script ? '<script src="/book/assets/booking.js" defer></script>\n' : ''}`,
    main: body,
    mainId: 'main',
  });
}

/** A page that says why the link cannot be used (unknown, expired, used, an error of ours). */
export function messagePage(heading: string, text: string): string {
  return layout(heading, `<h1>${escapeHtml(heading)}</h1>\n<p>${escapeHtml(text)}</p>`);
}

/** The languages of the page of a link whose account no longer books (Accept-Language picks one). */
export type PageLanguage = 'en' | 'de';
export const PAGE_LANGUAGES: PageLanguage[] = ['en', 'de'];

const UNAVAILABLE = {
  en: {
    heading: 'Booking is not available',
    text: 'Appointments cannot be booked with this link at the moment. Please contact the sender of the link.',
  },
  de: {
    heading: 'Buchung nicht verfügbar',
    text: 'Mit diesem Link können derzeit keine Termine gebucht werden. Bitte wenden Sie sich an den Absender des Links.',
  },
} as const;

/** The page of a link whose account no longer has the booking module. */
export function unavailablePage(language: PageLanguage): string {
  const { heading, text } = UNAVAILABLE[language];
  return layout(heading, `<h1>${escapeHtml(heading)}</h1>\n<p>${escapeHtml(text)}</p>`, false, language);
}

export function confirmationPage(view: {
  title: string;
  calendarName: string;
  startsAt: Date;
  endsAt: Date;
  zone: string;
  cancelled: boolean;
}): string {
  const when = `${whenIn(view.startsAt, view.endsAt, view.zone)} (${view.zone})`;
  const heading = view.cancelled ? 'This appointment was cancelled' : 'Your appointment is booked';
  const text = view.cancelled
    ? `${view.title} on ${when} was cancelled. Ask ${view.calendarName} for a new link.`
    : `${view.title} with ${view.calendarName}: ${when}. A confirmation with a calendar invitation follows by email when we have your address.`;
  return layout(
    heading,
    `<h1 id="confirmation" tabindex="-1">${escapeHtml(heading)}</h1>\n<p>${escapeHtml(text)}</p>`,
  );
}

export interface SlotPageView {
  token: string;
  title: string;
  calendarName: string;
  calendarZone: string;
  durationMinutes: number;
  zone: string;
  zoneChosen: boolean;
  week: DateTime;
  canGoBack: boolean;
  canGoForward: boolean;
  slots: { startsAt: Date; endsAt: Date }[];
  /** An alert above the slots (a slot just taken, no time picked). */
  alert: string | null;
}

function zoneSelect(selected: string): string {
  // The runtime lists each zone once, under its own name; a zone shown under another (a
  // calendar's `UTC`, `Etc/GMT-1` or alias `Asia/Kolkata`, stored as written) is listed first,
  // so that it stays the selected one rather than the list's first.
  const zones = timeZones();
  const options = (zones.includes(selected) ? zones : [selected, ...zones])
    .map(
      (zone) =>
        `<option value="${escapeHtml(zone)}"${zone === selected ? ' selected' : ''}>${escapeHtml(zone)}</option>`,
    )
    .join('');
  return `<select id="tz" name="tz">${options}</select>`;
}

/** The day groups of slots, as radio buttons: the same markup `booking.js` renders. */
function slotFieldsets(slots: SlotPageView['slots'], zone: string): string {
  if (slots.length === 0) return '<p id="no-slots">No free times in these days. Try the next days.</p>';
  const days = new Map<string, string[]>();
  for (const slot of slots) {
    const local = DateTime.fromJSDate(slot.startsAt, { zone }).setLocale(LOCALE);
    const day = local.toFormat('cccc d LLLL');
    const value = slot.startsAt.toISOString();
    const id = `slot-${slot.startsAt.getTime()}`;
    const item = `<li><input type="radio" name="starts_at" id="${id}" value="${value}" required><label for="${id}">${escapeHtml(clockTime(local))}</label></li>`;
    days.set(day, [...(days.get(day) ?? []), item]);
  }
  return [...days]
    .map(
      ([day, items]) =>
        `<fieldset><legend>${escapeHtml(day)}</legend><ul class="slots">${items.join('')}</ul></fieldset>`,
    )
    .join('\n');
}

export function slotPage(view: SlotPageView): string {
  const base = `/book/${encodeURIComponent(view.token)}`;
  const weekLink = (days: number) =>
    `${base}?tz=${encodeURIComponent(view.zone)}&amp;week=${view.week.plus({ days }).toISODate()}`;
  const alert = view.alert ? `<p class="alert" role="alert">${escapeHtml(view.alert)}</p>` : '';
  const nav = [
    view.canGoBack ? `<a id="earlier" href="${weekLink(-7)}">Earlier days</a>` : '',
    view.canGoForward ? `<a id="later" href="${weekLink(7)}">Later days</a>` : '',
  ].join(' ');
  const body = `<h1>${escapeHtml(view.title)}</h1>
<p>${escapeHtml(view.calendarName)} · ${view.durationMinutes} minutes</p>
${alert}
<form method="get" action="${base}" id="zone-form">
<label for="tz">Times shown in</label>
${zoneSelect(view.zone)}
<input type="hidden" name="week" value="${view.week.toISODate()}">
<button type="submit">Show times</button>
</form>
<form method="post" action="${base}" id="book-form">
<input type="hidden" name="tz" value="${escapeHtml(view.zone)}">
<h2 id="days-heading">Pick a time</h2>
<div id="slots" aria-live="polite" data-token="${escapeHtml(view.token)}" data-zone="${escapeHtml(view.zone)}" data-zone-chosen="${view.zoneChosen}" data-week="${view.week.toISODate()}">
${slotFieldsets(view.slots, view.zone)}
</div>
<nav aria-label="Days" id="week-nav">${nav}</nav>
<button type="submit" id="book">Book this time</button>
</form>`;
  return layout(view.title, body, true);
}

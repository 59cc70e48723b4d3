import { ADMIN_TOKEN, type TestAccount, type TestApp } from '../helpers/app.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

/** A clock the tests move; the services read it through `now`. */
export function testClock(start: string) {
  let current = new Date(start);
  return {
    now: () => new Date(current),
    set(iso: string) {
      current = new Date(iso);
    },
    advance(ms: number) {
      current = new Date(current.getTime() + ms);
    },
  };
}

const MORNING = [['09:00', '12:00']];

/** Weekdays 09:00–12:00 in Berlin, 30-minute slots, 60 minutes' notice, one seat a slot. */
export const BERLIN_CALENDAR = {
  name: 'Consultation',
  time_zone: 'Europe/Berlin',
  slot_minutes: 30,
  min_notice_minutes: 60,
  horizon_days: 30,
  weekly: { mon: MORNING, tue: MORNING, wed: MORNING, thu: MORNING, fri: MORNING },
};

export async function createCalendar(t: TestApp, account: TestAccount, body: object = BERLIN_CALENDAR) {
  const response = await t.request({
    method: 'POST',
    url: '/api/v1/settings/booking/calendars',
    key: account.apiKey,
    body,
  });
  if (response.statusCode !== 201) throw new Error(`calendar: ${response.body}`);
  return response.json() as { id: string; default: boolean };
}

/** An account with the booking module, the lead entity and the Berlin calendar. */
export async function bookingAccount(t: TestApp, modules = ['booking']) {
  const account = await accountWithLeads(t, { modules });
  const calendar = await createCalendar(t, account);
  return { account, calendar };
}

/** A record with a booking link through intake. */
export async function recordWithLink(t: TestApp, account: TestAccount, email = 'ann@example.com') {
  const response = await t.request({
    method: 'POST',
    url: '/api/v1/records',
    key: account.apiKey,
    body: { entity: 'lead', fields: { email, first_name: 'Ann' }, booking: { title: 'Intro call' } },
  });
  if (response.statusCode !== 201) throw new Error(`intake: ${response.body}`);
  const body = response.json();
  return {
    recordId: body.id as string,
    token: body.booking.token as string,
    url: body.booking.url as string,
  };
}

export async function appointmentCount(t: TestApp, accountId: string, status = 'booked') {
  const rows = await t.db
    .selectFrom('appointments')
    .select('id')
    .where('account_id', '=', accountId)
    .where('status', '=', status)
    .execute();
  return rows.length;
}

export async function emailsOf(t: TestApp, accountId: string) {
  return t.db
    .selectFrom('outbound_messages')
    .select(['id', 'event_type', 'payload'])
    .where('account_id', '=', accountId)
    .where('channel', '=', 'email')
    .execute();
}

/** Books a slot through the public JSON with a link's token. */
export function publicBook(t: TestApp, token: string, startsAt: string) {
  return t.request({ method: 'POST', url: '/api/v1/booking/book', body: { token, starts_at: startsAt } });
}

/** Sets an account's modules as the operator does (PATCH /admin/v1/accounts/{id}). */
export async function setModules(t: TestApp, accountId: string, modules: string[]) {
  const response = await t.request({
    method: 'PATCH',
    url: `/admin/v1/accounts/${accountId}`,
    key: ADMIN_TOKEN,
    body: { modules },
  });
  if (response.statusCode !== 200) throw new Error(`modules: ${response.body}`);
}

/** A record through intake that asks to book `startsAt`. */
export function intakeBooking(t: TestApp, account: TestAccount, email: string, startsAt: string) {
  return t.request({
    method: 'POST',
    url: '/api/v1/records',
    key: account.apiKey,
    body: { entity: 'lead', fields: { email }, booking: { starts_at: startsAt } },
  });
}

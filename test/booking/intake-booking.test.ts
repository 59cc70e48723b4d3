import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads, historyOf } from '../helpers/fixtures.ts';
import {
  appointmentCount,
  bookingAccount,
  createCalendar,
  emailsOf,
  recordWithLink,
  testClock,
} from './support.ts';

// Monday 2027-03-22, 07:00 in Berlin (CET). The first bookable slot is 09:00 (= 08:00Z).
const clock = testClock('2027-03-22T06:00:00Z');
const FREE_SLOT = '2027-03-22T10:00:00+01:00';
const FREE_SLOT_UTC = '2027-03-22T09:00:00.000Z';

describe.each(TEST_DATABASES)('intake books and makes booking links on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind, { now: clock.now, concurrentCreates: 4 });
  });
  afterAll(async () => t?.close());

  const intake = (key: string, body: object, url = '/api/v1/records') =>
    t.request({ method: 'POST', url, key, body });

  describe('happy path', () => {
    it('makes a link without starts_at (rule 2): token, url, expiry in 14 days, no email', async () => {
      const { account } = await bookingAccount(t);
      const response = await intake(account.apiKey, {
        entity: 'lead',
        fields: { email: 'ann@example.com' },
        booking: { title: 'Intro call' },
      });
      expect(response.statusCode).toBe(201);
      const body = response.json();
      expect(body.created).toBe(true);
      expect(body.warnings).toEqual([]);
      expect(body.booking.token).toMatch(/^bk_[0-9A-Za-z]{33}$/);
      expect(body.booking.url).toBe(`http://127.0.0.1:3000/book/${body.booking.token}`);
      expect(Date.parse(body.booking.expires_at) - clock.now().getTime()).toBe(14 * 86_400_000);
      expect(body.booking).not.toHaveProperty('appointment_id');
      expect(await emailsOf(t, account.id)).toEqual([]);
      expect(await appointmentCount(t, account.id)).toBe(0);
      // Only a hash of the token is stored.
      const stored = await t.db
        .selectFrom('booking_links')
        .selectAll()
        .where('account_id', '=', account.id)
        .execute();
      expect(stored).toHaveLength(1);
      expect(JSON.stringify(stored)).not.toContain(body.booking.token);
    });

    it('books a free starts_at at once (rule 3), with history, webhook and email in the same transaction', async () => {
      const { account, calendar } = await bookingAccount(t);
      await t.request({
        method: 'POST',
        url: '/api/v1/settings/webhooks',
        key: account.apiKey,
        body: { url: 'http://127.0.0.1:9/hook', events: ['booking.created'] },
      });
      const response = await intake(account.apiKey, {
        entity: 'lead',
        fields: { email: 'Bob@Example.com', first_name: 'Bob' },
        booking: { starts_at: FREE_SLOT, title: 'Site visit', duration_minutes: 20 },
      });
      expect(response.statusCode).toBe(201);
      const body = response.json();
      expect(body.warnings).toEqual([]);
      expect(body.booking).toEqual({ appointment_id: expect.any(String), starts_at: FREE_SLOT_UTC });
      const appointment = await t.request({
        method: 'GET',
        url: `/api/v1/booking/appointments/${body.booking.appointment_id}`,
        key: account.apiKey,
      });
      expect(appointment.json()).toMatchObject({
        calendar_id: calendar.id,
        record_id: body.id,
        title: 'Site visit',
        starts_at: FREE_SLOT_UTC,
        ends_at: '2027-03-22T09:20:00.000Z',
        status: 'booked',
      });
      expect(await historyOf(t, account.apiKey, body.id)).toContain('appointment_booked');
      const hooks = await t.db
        .selectFrom('outbound_messages')
        .select(['event_type', 'payload'])
        .where('account_id', '=', account.id)
        .where('channel', '=', 'webhook')
        .execute();
      expect(hooks.map((hook) => hook.event_type)).toContain('booking.created');
      const created = hooks.find((hook) => hook.event_type === 'booking.created')!;
      expect((created.payload as { data: { appointment: { id: string } } }).data.appointment.id).toBe(
        body.booking.appointment_id,
      );
      const emails = await emailsOf(t, account.id);
      expect(emails).toHaveLength(1);
      expect(emails[0]!.event_type).toBe('booking.confirmation');
      expect((emails[0]!.payload as { to: string[] }).to).toEqual(['bob@example.com']);
    });

    it('answers slot_taken with a link when the slot is taken or not on offer (rule 3)', async () => {
      const { account } = await bookingAccount(t);
      const first = await intake(account.apiKey, {
        entity: 'lead',
        fields: { email: 'first@example.com' },
        booking: { starts_at: FREE_SLOT },
      });
      expect(first.json().booking.appointment_id).toBeDefined();
      for (const startsAt of [
        FREE_SLOT,
        '2027-03-22T10:10:00+01:00',
        '2027-03-27T10:00:00+01:00',
        '2027-03-22T07:30:00+01:00',
      ]) {
        // Taken; off the grid; a Saturday; inside the minimum notice.
        const response = await intake(account.apiKey, {
          entity: 'lead',
          fields: { email: 'second@example.com' },
          booking: { starts_at: startsAt },
        });
        expect(response.statusCode, startsAt).toBe(201);
        const body = response.json();
        expect(body.created).toBe(true);
        expect(body.warnings).toEqual([
          { key: 'booking.starts_at', reason: 'slot_taken', message: expect.any(String) },
        ]);
        expect(body.booking.token).toMatch(/^bk_/);
      }
      expect(await appointmentCount(t, account.id)).toBe(1);
    });

    it('takes the booking node in bulk entries and on the source-token door', async () => {
      const { account } = await bookingAccount(t);
      const bulk = await intake(
        account.apiKey,
        {
          records: [
            { entity: 'lead', fields: { email: 'b1@example.com' }, booking: {} },
            { entity: 'lead', fields: { email: 'b2@example.com' }, booking: { starts_at: FREE_SLOT } },
            { entity: 'lead', fields: { email: 'b3@example.com' } },
          ],
        },
        '/api/v1/records/bulk',
      );
      expect(bulk.statusCode).toBe(200);
      const results = bulk.json().results;
      expect(results[0].booking.token).toMatch(/^bk_/);
      expect(results[1].booking.appointment_id).toBeDefined();
      expect(results[2]).not.toHaveProperty('booking');
      const source = await t.request({
        method: 'POST',
        url: '/api/v1/settings/sources',
        key: account.apiKey,
        body: { name: 'Website' },
      });
      const viaToken = await t.request({
        method: 'POST',
        url: `/api/v1/in/${source.json().token}`,
        body: { entity: 'lead', fields: { email: 'web@example.com' }, booking: { starts_at: FREE_SLOT } },
      });
      expect(viaToken.statusCode).toBe(201);
      expect(viaToken.json().warnings).toEqual([
        { key: 'booking.starts_at', reason: 'slot_taken', message: expect.any(String) },
      ]);
      expect(viaToken.json().booking.token).toMatch(/^bk_/);
    });

    it('takes the S1 spelling: booking:* keys (JSON or form) and booking: true', async () => {
      const { account } = await bookingAccount(t);
      const flat = await intake(
        account.apiKey,
        {
          entity: 'lead',
          email: 's1@example.com',
          'booking:starts_at': FREE_SLOT,
          'booking:title': 'S1 call',
        },
        '/api/intake',
      );
      expect(flat.statusCode).toBe(200);
      expect(flat.json()).toMatchObject({
        status: 'success',
        booking: { appointment_id: expect.any(String), starts_at: FREE_SLOT_UTC },
        warnings: [],
      });
      const form = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: `entity=lead&email=form%40example.com&booking%3Astarts_at=${encodeURIComponent(FREE_SLOT)}&booking%3Aduration_minutes=15`,
      });
      expect(form.statusCode).toBe(200);
      expect(form.json().warnings).toEqual([
        { key: 'booking.starts_at', reason: 'slot_taken', message: expect.any(String) },
      ]);
      expect(form.json().booking.token).toMatch(/^bk_/);
      const link = await intake(
        account.apiKey,
        { entity: 'lead', email: 'l@example.com', booking: true },
        '/api/intake',
      );
      expect(link.json().booking.token).toMatch(/^bk_/);
      const plain = await intake(account.apiKey, { entity: 'lead', email: 'p@example.com' }, '/api/intake');
      expect(plain.json()).not.toHaveProperty('booking');
      expect(plain.json()).not.toHaveProperty('warnings');
      const bulk = await intake(
        account.apiKey,
        { entity: 'lead', batch: [{ email: 'x1@example.com', booking: true }, { email: 'x2@example.com' }] },
        '/api/leads/bulk',
      );
      expect(bulk.statusCode).toBe(200);
      expect(bulk.json().created[0].booking.token).toMatch(/^bk_/);
      expect(bulk.json().created[1]).not.toHaveProperty('booking');
    });

    it('uses booking.calendar_id over the default calendar', async () => {
      const { account } = await bookingAccount(t);
      const weekend = await createCalendar(t, account, {
        name: 'Weekend',
        time_zone: 'Europe/Berlin',
        min_notice_minutes: 0,
        weekly: { sat: [['10:00', '11:00']] },
      });
      const saturday = '2027-03-27T10:00:00+01:00';
      const viaDefault = await intake(account.apiKey, {
        entity: 'lead',
        fields: { email: 'd@example.com' },
        booking: { starts_at: saturday },
      });
      expect(viaDefault.json().warnings[0].reason).toBe('slot_taken');
      const viaCalendar = await intake(account.apiKey, {
        entity: 'lead',
        fields: { email: 'w@example.com' },
        booking: { starts_at: saturday, calendar_id: weekend.id },
      });
      expect(viaCalendar.json().booking.appointment_id).toBeDefined();
    });
  });

  describe('errors', () => {
    it('warns invalid_starts_at on an unreadable time, and still makes the record and a link', async () => {
      const { account } = await bookingAccount(t);
      // A value of another type is no readable time either: the record is made in every case.
      for (const startsAt of [
        'next monday',
        '2027-03-22T10:00:00',
        '2027-02-30T10:00:00Z',
        1_805_706_000,
        true,
        { date: '2027-03-22' },
        'x'.repeat(300),
      ]) {
        const response = await intake(account.apiKey, {
          entity: 'lead',
          fields: { email: 'bad@example.com' },
          booking: { starts_at: startsAt },
        });
        expect(response.statusCode).toBe(201);
        expect(response.json().warnings).toEqual([
          { key: 'booking.starts_at', reason: 'invalid_starts_at', message: expect.any(String) },
        ]);
        expect(response.json().booking.token).toMatch(/^bk_/);
      }
      const noTime = await intake(account.apiKey, {
        entity: 'lead',
        fields: { email: 'null-time@example.com' },
        booking: { starts_at: null },
      });
      expect(noTime.statusCode).toBe(201);
      expect(noTime.json().warnings).toEqual([]);
      expect(noTime.json().booking.token).toMatch(/^bk_/);
    });

    it('warns invalid_starts_at on an impossible offset or part, instead of booking another time', async () => {
      const { account } = await bookingAccount(t);
      // Each of these was read as a free slot: +24:00 and +23:60 a day early, +99:00 four days
      // and three hours, +47:00 nearly two days; hour 24 as the next midnight.
      for (const startsAt of [
        '2027-03-23T10:00:00+24:00',
        '2027-03-23T10:30:00+23:60',
        '2027-03-27T12:00:00+99:00',
        '2027-03-25T09:30:00+47:00',
        '2027-03-21T10:00:00-24:00',
        '2027-03-23T10:00:00+2400',
        '2027-03-22T24:00:00-09:00',
        '2027-13-22T10:00:00Z',
        '2027-03-32T10:00:00Z',
        '2027-02-29T10:00:00Z',
        '2027-03-22T25:00:00Z',
        '2027-03-22T10:60:00Z',
        '2027-03-22T10:00:60Z',
      ]) {
        const response = await intake(account.apiKey, {
          entity: 'lead',
          fields: { email: 'offset@example.com' },
          booking: { starts_at: startsAt },
        });
        expect(response.statusCode, startsAt).toBe(201);
        expect(response.json().warnings, startsAt).toEqual([
          { key: 'booking.starts_at', reason: 'invalid_starts_at', message: expect.any(String) },
        ]);
        expect(response.json().booking.token).toMatch(/^bk_/);
      }
      expect(await appointmentCount(t, account.id)).toBe(0);
      // The widest real offsets are read: 10:01 at -23:59 is 10:00Z the next day, a free slot.
      const widest = await intake(account.apiKey, {
        entity: 'lead',
        fields: { email: 'widest@example.com' },
        booking: { starts_at: '2027-03-21T10:01:00-23:59' },
      });
      expect(widest.json().booking).toEqual({
        appointment_id: expect.any(String),
        starts_at: '2027-03-22T10:00:00.000Z',
      });
    });

    it('warns no_calendar without a calendar (or with an unknown calendar_id); the record is created', async () => {
      const account = await accountWithLeads(t, { modules: ['booking'] });
      const response = await intake(account.apiKey, {
        entity: 'lead',
        fields: { email: 'nocal@example.com' },
        booking: { starts_at: FREE_SLOT },
      });
      expect(response.statusCode).toBe(201);
      expect(response.json().warnings).toEqual([
        { key: 'booking', reason: 'no_calendar', message: expect.any(String) },
      ]);
      expect(response.json()).not.toHaveProperty('booking');
      await createCalendar(t, account);
      const unknown = await intake(account.apiKey, {
        entity: 'lead',
        fields: { email: 'nocal2@example.com' },
        booking: { calendar_id: '00000000-0000-4000-8000-000000000000' },
      });
      expect(unknown.json().warnings[0].reason).toBe('no_calendar');
      const records = await t.request({ method: 'GET', url: '/api/v1/records', key: account.apiKey });
      expect(records.json().records).toHaveLength(2);
    });

    it('warns module_not_enabled without the module, on S2 and S1, and books nothing', async () => {
      const account = await accountWithLeads(t, { modules: [] });
      const s2 = await intake(account.apiKey, {
        entity: 'lead',
        fields: { email: 'nomod@example.com' },
        booking: { starts_at: FREE_SLOT },
      });
      expect(s2.statusCode).toBe(201);
      expect(s2.json().warnings).toEqual([
        { key: 'booking', reason: 'module_not_enabled', message: expect.any(String) },
      ]);
      expect(s2.json()).not.toHaveProperty('booking');
      const s1 = await intake(
        account.apiKey,
        { entity: 'lead', email: 'nomod1@example.com', booking: true },
        '/api/intake',
      );
      expect(s1.statusCode).toBe(200);
      expect(s1.json().warnings).toEqual([
        { key: 'booking', reason: 'module_not_enabled', message: expect.any(String) },
      ]);
      // An S1 bulk item answers as a single S1 lead does; a lead without the node has no warnings.
      const bulk = await intake(
        account.apiKey,
        {
          entity: 'lead',
          batch: [{ email: 'nomod2@example.com', booking: true }, { email: 'nomod3@example.com' }],
        },
        '/api/leads/bulk',
      );
      expect(bulk.statusCode).toBe(200);
      const [asked, plain] = bulk.json().created;
      expect(asked.warnings).toEqual([
        { key: 'booking', reason: 'module_not_enabled', message: expect.any(String) },
      ]);
      expect(plain).not.toHaveProperty('warnings');
      expect(await appointmentCount(t, account.id)).toBe(0);
    });

    it('clamps a duration longer than the calendar’s slots, with a warning', async () => {
      const { account } = await bookingAccount(t);
      const response = await intake(account.apiKey, {
        entity: 'lead',
        fields: { email: 'long@example.com' },
        booking: { starts_at: FREE_SLOT, duration_minutes: 90 },
      });
      expect(response.json().warnings).toEqual([
        { key: 'booking.duration_minutes', reason: 'duration_too_long', message: expect.any(String) },
      ]);
      const appointment = await t.request({
        method: 'GET',
        url: `/api/v1/booking/appointments/${response.json().booking.appointment_id}`,
        key: account.apiKey,
      });
      expect(appointment.json().ends_at).toBe('2027-03-22T09:30:00.000Z');
    });

    it('warns of a blank title and uses the calendar’s name, on S2 and S1; null stays 422', async () => {
      const { account } = await bookingAccount(t);
      const blank = { key: 'booking.title', reason: 'blank', message: expect.any(String) };
      for (const [index, title] of ['', '   ', '\u200B\t'].entries()) {
        const response = await intake(account.apiKey, {
          entity: 'lead',
          fields: { email: `blank${index}@example.com` },
          booking: { title, ...(index === 0 ? { starts_at: FREE_SLOT } : {}) },
        });
        expect(response.statusCode, JSON.stringify(title)).toBe(201);
        expect(response.json().warnings, JSON.stringify(title)).toEqual([blank]);
        if (index === 0) {
          const appointment = await t.request({
            method: 'GET',
            url: `/api/v1/booking/appointments/${response.json().booking.appointment_id}`,
            key: account.apiKey,
          });
          expect(appointment.json().title).toBe('Consultation');
        } else {
          const page = await t.app.inject({ method: 'GET', url: `/book/${response.json().booking.token}` });
          expect(page.body).toContain('<h1>Consultation</h1>');
        }
      }
      // Blanks around a title are trimmed, without a warning.
      const padded = await intake(account.apiKey, {
        entity: 'lead',
        fields: { email: 'padded@example.com' },
        booking: { title: '  Intro call ', starts_at: '2027-03-22T10:30:00+01:00' },
      });
      expect(padded.json().warnings).toEqual([]);
      const appointment = await t.request({
        method: 'GET',
        url: `/api/v1/booking/appointments/${padded.json().booking.appointment_id}`,
        key: account.apiKey,
      });
      expect(appointment.json().title).toBe('Intro call');
      // S1: the object's blank title and a flat key of blanks warn; a form's empty field is not given.
      const s1 = await intake(
        account.apiKey,
        { entity: 'lead', email: 'blank-s1@example.com', booking: { title: ' ' } },
        '/api/intake',
      );
      expect(s1.statusCode).toBe(200);
      expect(s1.json().warnings).toEqual([blank]);
      const form = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'entity=lead&email=blank-form%40example.com&booking%3Atitle=%20%20',
      });
      expect(form.statusCode).toBe(200);
      expect(form.json().warnings).toEqual([blank]);
      const empty = await t.request({
        method: 'POST',
        url: '/api/intake',
        key: account.apiKey,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'entity=lead&email=empty-form%40example.com&booking=true&booking%3Atitle=',
      });
      expect(empty.statusCode).toBe(200);
      expect(empty.json().warnings).toEqual([]);
      // null is no text: a wrongly typed key, 422 as before.
      const nullTitle = await intake(account.apiKey, {
        entity: 'lead',
        fields: { email: 'null@example.com' },
        booking: { title: null },
      });
      expect(nullTitle.statusCode).toBe(422);
      expect(nullTitle.json().details).toEqual([
        expect.objectContaining({ key: 'booking.title', reason: 'invalid_type' }),
      ]);
    });

    it('warns of a key the booking node does not take and still books, on S2 and S1', async () => {
      const { account } = await bookingAccount(t);
      const s2 = await intake(account.apiKey, {
        entity: 'lead',
        fields: { email: 'zone@example.com' },
        booking: { title: 'Intro call', time_zone: 'Europe/Berlin' },
      });
      expect(s2.statusCode).toBe(201);
      expect(s2.json().warnings).toEqual([{ key: 'booking.time_zone', reason: 'unmapped' }]);
      expect(s2.json().booking.token).toMatch(/^bk_/);
      const s1 = await intake(
        account.apiKey,
        { entity: 'lead', email: 'zone-s1@example.com', booking: { title: 'Intro call', time_zone: 'UTC' } },
        '/api/intake',
      );
      expect(s1.statusCode).toBe(200);
      expect(s1.json().warnings).toEqual([{ key: 'booking.time_zone', reason: 'unmapped' }]);
      expect(s1.json().booking.token).toMatch(/^bk_/);
    });

    it('refuses a wrongly typed booking node with 422 and writes nothing', async () => {
      const { account } = await bookingAccount(t);
      const response = await intake(account.apiKey, {
        entity: 'lead',
        fields: { email: 'typed@example.com' },
        booking: { starts_at: FREE_SLOT, duration_minutes: 'thirty' },
      });
      expect(response.statusCode).toBe(422);
      expect(response.json().details).toEqual([
        expect.objectContaining({ key: 'booking.duration_minutes', reason: 'invalid_type' }),
      ]);
      const records = await t.request({ method: 'GET', url: '/api/v1/records', key: account.apiKey });
      expect(records.json().records).toHaveLength(0);
    });
  });

  describe('concurrency', () => {
    it('gives one appointment for 20 concurrent intakes of one capacity-1 slot; the others get links', async () => {
      const { account } = await bookingAccount(t);
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, index) =>
          intake(account.apiKey, {
            entity: 'lead',
            fields: { email: `c${index}@example.com` },
            booking: { starts_at: FREE_SLOT },
          }),
        ),
      );
      expect(answers.map((answer) => answer.statusCode)).toEqual(Array(20).fill(201));
      const booked = answers.filter((answer) => answer.json().booking.appointment_id);
      expect(booked).toHaveLength(1);
      const refused = answers.filter((answer) => answer.json().warnings[0]?.reason === 'slot_taken');
      expect(refused).toHaveLength(19);
      expect(refused.every((answer) => answer.json().booking.token)).toBe(true);
      expect(await appointmentCount(t, account.id)).toBe(1);
    });

    it('gives exactly one appointment for 20 concurrent bookings of one slot through the public API', async () => {
      const { account } = await bookingAccount(t);
      const links = await Promise.all(
        Array.from({ length: 20 }, (_, index) => recordWithLink(t, account, `p${index}@example.com`)),
      );
      const answers = await Promise.all(
        links.map((link) =>
          t.request({
            method: 'POST',
            url: '/api/v1/booking/book',
            body: { token: link.token, starts_at: FREE_SLOT },
          }),
        ),
      );
      expect(answers.filter((answer) => answer.statusCode === 201)).toHaveLength(1);
      const refused = answers.filter((answer) => answer.statusCode === 409);
      expect(refused).toHaveLength(19);
      expect(refused.every((answer) => answer.json().error === 'slot_taken')).toBe(true);
      expect(await appointmentCount(t, account.id)).toBe(1);
    });

    it('fills a capacity-3 slot with exactly 3 of 20 concurrent bookings', async () => {
      const account = await accountWithLeads(t, { modules: ['booking'] });
      await createCalendar(t, account, {
        name: 'Group session',
        time_zone: 'Europe/Berlin',
        capacity: 3,
        min_notice_minutes: 0,
        weekly: { mon: [['09:00', '12:00']] },
      });
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, index) =>
          intake(account.apiKey, {
            entity: 'lead',
            fields: { email: `g${index}@example.com` },
            booking: { starts_at: FREE_SLOT },
          }),
        ),
      );
      expect(answers.filter((answer) => answer.json().booking.appointment_id)).toHaveLength(3);
      expect(await appointmentCount(t, account.id)).toBe(3);
    });

    it('uses one link once when it is used 10 times at once', async () => {
      const { account } = await bookingAccount(t);
      const link = await recordWithLink(t, account);
      const slots = [
        '2027-03-22T09:00:00Z',
        '2027-03-22T09:30:00Z',
        '2027-03-22T10:00:00Z',
        '2027-03-22T10:30:00Z',
        '2027-03-23T08:00:00Z',
      ];
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, index) =>
          t.request({
            method: 'POST',
            url: '/api/v1/booking/book',
            body: { token: link.token, starts_at: slots[index % slots.length] },
          }),
        ),
      );
      expect(answers.filter((answer) => answer.statusCode === 201)).toHaveLength(1);
      expect(answers.filter((answer) => answer.json().error === 'already_booked')).toHaveLength(9);
      expect(await appointmentCount(t, account.id)).toBe(1);
    });
  });
});

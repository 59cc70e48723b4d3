import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TEST_DATABASES } from '../helpers/databases.ts';
import { accountWithLeads } from '../helpers/fixtures.ts';

/**
 * Until migration 0025 an appointment held one seat of its slot's start (`appointments.seat`);
 * since, it holds a seat in every minute it covers (`appointment_seats`). An upgraded database
 * must carry the booked appointments over, so that the capacity holds for them too.
 */
describe.each(TEST_DATABASES)('migration 0025 (seats by the minute) on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind);
  });
  afterAll(async () => t?.close());

  it('gives each booked appointment a seat in every minute it covers, in booking order, and none to a cancelled one', async () => {
    const account = await accountWithLeads(t);
    const recordId = (
      await t.request({
        method: 'POST',
        url: '/api/v1/records',
        key: account.apiKey,
        body: { entity: 'lead', fields: { email: 'seats@b.co' } },
      })
    ).json().id as string;
    const calendarId = randomUUID();
    await t.db
      .insertInto('calendars')
      .values({
        account_id: account.id,
        id: calendarId,
        name: 'Desk',
        time_zone: 'UTC',
        slot_minutes: 30,
        buffer_minutes: 0,
        min_notice_minutes: 0,
        horizon_days: 30,
        capacity: 2,
        weekly: JSON.stringify({}),
      } as never)
      .execute();

    // The schema as 0008 left it: the seat a column of the appointment, unique per slot start.
    await sql`DROP TABLE appointment_seats`.execute(t.db);
    await sql`DROP INDEX appointments_calendar_time`.execute(t.db);
    await sql`ALTER TABLE appointments ADD COLUMN seat integer NOT NULL DEFAULT 0`.execute(t.db);
    await sql`CREATE UNIQUE INDEX appointments_seat ON appointments (account_id, calendar_id, starts_at, seat)
      WHERE status = 'booked'`.execute(t.db);
    const ids = {
      a: randomUUID(),
      b: randomUUID(),
      c: randomUUID(),
      cancelled: randomUUID(),
      odd: randomUUID(),
    };
    const appointment = (
      id: string,
      from: string,
      to: string,
      seat: number,
      createdAt: string,
      status = 'booked',
    ) =>
      sql`INSERT INTO appointments (account_id, id, record_id, calendar_id, title, starts_at, ends_at, seat, status, created_at)
        VALUES (${account.id}, ${id}, ${recordId}, ${calendarId}, 'Call', ${from}::timestamptz, ${to}::timestamptz, ${seat},
          ${status}, ${createdAt}::timestamptz)`.execute(t.db);
    await appointment(ids.a, '2030-01-07T10:00:00Z', '2030-01-07T10:30:00Z', 0, '2029-12-01T00:00:01Z');
    await appointment(ids.b, '2030-01-07T10:00:00Z', '2030-01-07T10:30:00Z', 1, '2029-12-01T00:00:02Z');
    // Booked on the old slot grid of 15 minutes: it overlaps a and b, three in minutes of two seats.
    await appointment(ids.c, '2030-01-07T10:15:00Z', '2030-01-07T10:45:00Z', 0, '2029-12-01T00:00:03Z');
    await appointment(
      ids.cancelled,
      '2030-01-07T10:00:00Z',
      '2030-01-07T10:30:00Z',
      0,
      '2029-12-01T00:00:00Z',
      'cancelled',
    );
    // Off the minute: it covers each minute it touches.
    await appointment(ids.odd, '2030-01-07T12:00:30Z', '2030-01-07T12:01:10Z', 0, '2029-12-01T00:00:04Z');

    await sql`DELETE FROM schema_migrations WHERE name = '0025_appointment_seats.sql'`.execute(t.db);
    expect((await migrate(t.db)).applied).toEqual(['0025_appointment_seats.sql']);

    const seats = await sql<{ appointment_id: string; minute: number; seat: number }>`
      SELECT appointment_id, minute, seat FROM appointment_seats
      WHERE account_id = ${account.id} ORDER BY minute, seat`.execute(t.db);
    const minuteOf = (at: string) => Date.parse(at) / 60_000;
    const held = (id: string) =>
      seats.rows
        .filter((row) => row.appointment_id === id)
        .map((row) => `${row.minute - minuteOf('2030-01-07T10:00:00Z')}:${row.seat}`);
    const run = (from: number, to: number, seat: number) =>
      Array.from({ length: to - from }, (_, i) => `${from + i}:${seat}`);
    expect(held(ids.a)).toEqual(run(0, 30, 0));
    expect(held(ids.b)).toEqual(run(0, 30, 1));
    // Seats 0 and 1 are a's and b's until 10:30: c keeps its minutes there on the seat above.
    expect(held(ids.c)).toEqual([...run(15, 30, 2), ...run(30, 45, 0)]);
    expect(held(ids.cancelled)).toEqual([]);
    expect(held(ids.odd)).toEqual(['120:0', '121:0']);
    expect(seats.rows.every((row) => row.seat >= 0)).toBe(true);

    const seatColumn = await sql<{ n: number }>`SELECT count(*)::int AS n FROM information_schema.columns
      WHERE table_name = 'appointments' AND column_name = 'seat'`.execute(t.db);
    expect(seatColumn.rows[0]!.n).toBe(0);
    // The capacity holds from here on: a third seat-0 booking of 10:00 is refused by the index.
    await expect(
      sql`INSERT INTO appointment_seats (account_id, appointment_id, minute, calendar_id, seat)
        VALUES (${account.id}, ${ids.cancelled}, ${minuteOf('2030-01-07T10:00:00Z')}, ${calendarId}, 0)`.execute(
        t.db,
      ),
    ).rejects.toThrow();
  });
});

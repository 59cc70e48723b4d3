-- Capacity by overlap (decisions §11: never more bookings than `capacity` at once). A booked
-- appointment holds one seat in every minute it covers (`minute`: minutes since 1970-01-01 UTC),
-- so a slot of a changed grid (another slot length or buffer) sees the appointments it overlaps.
-- The unique index over (calendar, minute, seat) is what keeps a calendar within its capacity
-- under any concurrency: a booking takes, seat by seat below the capacity, every minute it still
-- lacks with INSERT … ON CONFLICT DO NOTHING, and is refused when a minute has no seat left. The
-- primary key gives an appointment one seat a minute. A cancelled appointment's seats are
-- deleted. The seat by start (0008) goes.
CREATE TABLE appointment_seats (
  account_id uuid NOT NULL,
  appointment_id uuid NOT NULL,
  minute integer NOT NULL,
  calendar_id uuid NOT NULL,
  seat integer NOT NULL,
  PRIMARY KEY (account_id, appointment_id, minute),
  FOREIGN KEY (account_id, appointment_id) REFERENCES appointments(account_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX appointment_seats_taken ON appointment_seats (account_id, calendar_id, minute, seat);

-- The booked appointments' minutes, numbered per minute in booking order (a minute that already
-- held more than its capacity keeps them all, on seats at and above it).
INSERT INTO appointment_seats (account_id, appointment_id, minute, calendar_id, seat)
SELECT a.account_id, a.id, m.minute, a.calendar_id,
  (row_number() OVER (PARTITION BY a.account_id, a.calendar_id, m.minute ORDER BY a.created_at, a.id) - 1)::integer
FROM appointments a
CROSS JOIN LATERAL generate_series(
  floor(extract(epoch FROM a.starts_at) / 60)::integer,
  ceil(extract(epoch FROM a.ends_at) / 60)::integer - 1
) AS m(minute)
WHERE a.status = 'booked';

DROP INDEX appointments_seat;
ALTER TABLE appointments DROP COLUMN seat;
CREATE INDEX appointments_calendar_time ON appointments (account_id, calendar_id, starts_at) WHERE status = 'booked';

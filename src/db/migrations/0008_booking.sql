-- Booking module (decisions §11). The tables of 0001 were never used by a release, so they are
-- made anew in the shape the module needs.
DROP TABLE appointments;
DROP TABLE booking_links;
DROP TABLE calendars;

-- A calendar: opening hours in its own wall-clock time (`weekly`: {"mon": [["09:00","17:00"]], …},
-- `exceptions`: [{date, hours}]), the slot grid and its limits.
CREATE TABLE calendars (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text NOT NULL,
  time_zone text NOT NULL,
  slot_minutes integer NOT NULL,
  buffer_minutes integer NOT NULL,
  min_notice_minutes integer NOT NULL,
  horizon_days integer NOT NULL,
  capacity integer NOT NULL,
  weekly jsonb NOT NULL,
  exceptions jsonb NOT NULL DEFAULT '[]',
  is_default boolean NOT NULL DEFAULT false,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  updated_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id)
);
CREATE UNIQUE INDEX calendars_one_default ON calendars (account_id) WHERE is_default;
CREATE INDEX calendars_listing ON calendars (account_id, created_at, id);

-- A booking link: the record it books for, the calendar, what is booked; only the token's
-- SHA-256 is kept. `appointment_id` is set when the link was used.
CREATE TABLE booking_links (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  record_id uuid NOT NULL,
  calendar_id uuid NOT NULL,
  token_hash bytea NOT NULL,
  title text NOT NULL,
  duration_minutes integer NOT NULL,
  expires_at timestamptz(3) NOT NULL,
  appointment_id uuid,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, record_id) REFERENCES records(account_id, id) ON DELETE CASCADE,
  FOREIGN KEY (account_id, calendar_id) REFERENCES calendars(account_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX booking_links_token ON booking_links (token_hash);

-- An appointment holds one seat of one slot of its calendar. The unique index over
-- (calendar, slot start, seat) of booked appointments is what keeps a slot within its capacity
-- under any concurrency: a booking takes the lowest free seat below the capacity with
-- INSERT … ON CONFLICT DO NOTHING, and a cancelled appointment frees its seat.
CREATE TABLE appointments (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  record_id uuid NOT NULL,
  calendar_id uuid NOT NULL,
  link_id uuid,
  title text NOT NULL,
  starts_at timestamptz(3) NOT NULL,
  ends_at timestamptz(3) NOT NULL,
  seat integer NOT NULL,
  status text NOT NULL DEFAULT 'booked',
  sequence integer NOT NULL DEFAULT 0,
  cancel_reason text,
  cancelled_at timestamptz(3),
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, record_id) REFERENCES records(account_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX appointments_seat ON appointments (account_id, calendar_id, starts_at, seat) WHERE status = 'booked';
CREATE INDEX appointments_listing ON appointments (account_id, starts_at, id);
CREATE INDEX appointments_record ON appointments (account_id, record_id);

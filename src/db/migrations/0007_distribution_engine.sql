-- Distribution module (decisions §8), completing the tables of 0001 that nothing used yet.

-- A distribution is set up per entity and can be switched off without losing its setup.
ALTER TABLE distributions ADD COLUMN enabled boolean NOT NULL DEFAULT true;
ALTER TABLE distributions ADD COLUMN updated_at timestamptz(3) NOT NULL DEFAULT now();

-- A webhook participation sends through an outbound destination (purpose 'participation'), which
-- holds its URL and its secrets (encrypted, rotated with a 24-hour overlap as for account
-- webhooks); the participation's own secret column never held anything.
ALTER TABLE participations DROP COLUMN secret;
ALTER TABLE participations ADD COLUMN destination_id uuid;
ALTER TABLE participations ADD CONSTRAINT participations_destination
  FOREIGN KEY (account_id, destination_id) REFERENCES webhook_destinations(account_id, id);
-- The schedule as configured: {time_zone, weekdays: [1..7], from: "HH:MM", to: "HH:MM"}, or
-- null for always. Caps count days and months in its time zone (UTC without a schedule).
ALTER TABLE participations DROP COLUMN weekdays;
ALTER TABLE participations DROP COLUMN hours_from;
ALTER TABLE participations DROP COLUMN hours_to;
ALTER TABLE participations ADD COLUMN schedule jsonb;
-- Why a participation was paused by the service (a 410 from its receiver), null when by hand.
ALTER TABLE participations ADD COLUMN paused_reason text;
-- Smooth weighted round robin keeps each participation's running weight here (rule row locked).
ALTER TABLE participations ADD COLUMN current_weight integer NOT NULL DEFAULT 0;
ALTER TABLE participations ADD COLUMN updated_at timestamptz(3) NOT NULL DEFAULT now();
CREATE INDEX participations_distribution ON participations (account_id, distribution_id, created_at);

-- Deliveries per participation and period ('day:2026-11-24', 'month:2026-11'): a cap is held by
-- an upsert that only counts while the count is below the cap, so that concurrent runs cannot
-- exceed it (the row lock serialises them; no read-then-write).
CREATE TABLE participation_counts (
  account_id uuid NOT NULL,
  participation_id uuid NOT NULL,
  period text NOT NULL,
  count integer NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, participation_id, period),
  FOREIGN KEY (account_id, participation_id) REFERENCES participations(account_id, id) ON DELETE CASCADE
);

ALTER TABLE distribution_rules ADD COLUMN created_at timestamptz(3) NOT NULL DEFAULT now();
CREATE INDEX distribution_rules_order ON distribution_rules (account_id, distribution_id, position);

ALTER TABLE distribution_runs ADD CONSTRAINT distribution_runs_distribution
  FOREIGN KEY (account_id, distribution_id) REFERENCES distributions(account_id, id) ON DELETE CASCADE;

-- The outbound message that carries a delivery (webhook or email).
ALTER TABLE deliveries ADD COLUMN message_id uuid;
ALTER TABLE deliveries ADD COLUMN distribution_id uuid;
CREATE INDEX deliveries_run ON deliveries (account_id, run_id);
CREATE INDEX deliveries_record ON deliveries (account_id, record_id);
CREATE INDEX deliveries_status ON deliveries (account_id, status, created_at DESC, id DESC);

ALTER TABLE return_reasons ADD COLUMN created_at timestamptz(3) NOT NULL DEFAULT now();
CREATE UNIQUE INDEX return_reasons_name ON return_reasons (account_id, lower(name));

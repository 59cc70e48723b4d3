-- CRM automations (decisions §7): an automation names its target stage (`stage_id`), its action
-- as configured (`config`, the `action` object of the settings API, `action` its type), and, for
-- webhook actions, the outbound engine's destination that holds its URL and secret.
ALTER TABLE automations ADD COLUMN destination_id uuid;
ALTER TABLE automations ADD COLUMN updated_at timestamptz(3) NOT NULL DEFAULT now();
CREATE INDEX automations_listing ON automations (account_id, created_at, id);

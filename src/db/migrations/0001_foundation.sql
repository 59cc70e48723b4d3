-- Foundation schema. Every table carries account_id (the accounts table's own id is the
-- account id) so that every query filters by account and the schema can be sharded by it.

CREATE TABLE accounts (
  id uuid PRIMARY KEY,
  name text NOT NULL,
  modules text[] NOT NULL DEFAULT '{}',
  rate_limit_per_minute integer NOT NULL DEFAULT 1200,
  is_demo boolean NOT NULL DEFAULT false,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  updated_at timestamptz(3) NOT NULL DEFAULT now()
);

-- Instance-wide settings that belong to no account (generated secrets, demo flag). The
-- account_id column is kept for uniformity and is always the nil uuid.
CREATE TABLE instance_settings (
  account_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
  key text NOT NULL,
  value text NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, key)
);

CREATE TABLE users (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  email text NOT NULL,
  name text NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id)
);
CREATE UNIQUE INDEX users_email ON users (account_id, lower(email));

CREATE TABLE api_keys (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text NOT NULL,
  prefix text NOT NULL,
  key_hash bytea NOT NULL,
  strict boolean NOT NULL DEFAULT false,
  permissions text[] NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  revoked_at timestamptz(3),
  PRIMARY KEY (account_id, id)
);
CREATE UNIQUE INDEX api_keys_hash ON api_keys (key_hash);

CREATE TABLE sources (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id)
);
CREATE UNIQUE INDEX sources_name ON sources (account_id, lower(name));

CREATE TABLE source_tokens (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  source_id uuid NOT NULL,
  prefix text NOT NULL,
  token_hash bytea NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  revoked_at timestamptz(3),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, source_id) REFERENCES sources(account_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX source_tokens_hash ON source_tokens (token_hash);
-- One active token per source.
CREATE UNIQUE INDEX source_tokens_active ON source_tokens (account_id, source_id) WHERE revoked_at IS NULL;

-- Entities keep their field definitions and duplicate rule as JSON: they are read whole, cached,
-- and replaced whole (PUT), never queried field by field.
CREATE TABLE entities (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  key text NOT NULL,
  name text NOT NULL,
  archived boolean NOT NULL DEFAULT false,
  fields jsonb NOT NULL DEFAULT '[]',
  duplicate_rule jsonb,
  position integer NOT NULL DEFAULT 0,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  updated_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id)
);
CREATE UNIQUE INDEX entities_key ON entities (account_id, key);

CREATE TABLE pipelines (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  entity_id uuid NOT NULL,
  name text NOT NULL,
  position integer NOT NULL,
  archived boolean NOT NULL DEFAULT false,
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, entity_id) REFERENCES entities(account_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX pipelines_name ON pipelines (account_id, entity_id, name);

-- Pipelines and stages are kept (archived) when an entity definition drops them, so that records and their
-- history never point at a missing stage.
CREATE TABLE stages (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  pipeline_id uuid NOT NULL,
  name text NOT NULL,
  position integer NOT NULL,
  archived boolean NOT NULL DEFAULT false,
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, pipeline_id) REFERENCES pipelines(account_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX stages_name ON stages (account_id, pipeline_id, name);

CREATE TABLE records (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  entity_id uuid NOT NULL,
  name text NOT NULL DEFAULT '',
  fields jsonb NOT NULL DEFAULT '{}',
  source text NOT NULL DEFAULT 'api',
  source_id uuid,
  origin jsonb NOT NULL DEFAULT '{}',
  external_id text,
  -- Lower-cased value of the email-role field, for note lookups by email.
  email_lc text,
  -- Normalised values of the entity's duplicate-rule fields, for duplicate detection.
  dedupe_key text,
  duplicate_of uuid,
  pipeline_id uuid,
  stage_id uuid,
  stage_entered_at timestamptz(3),
  assignee_id uuid,
  viewer_ids uuid[] NOT NULL DEFAULT '{}',
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  updated_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, entity_id) REFERENCES entities(account_id, id)
);
CREATE UNIQUE INDEX records_external_id ON records (account_id, entity_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX records_email ON records (account_id, email_lc) WHERE email_lc IS NOT NULL;
CREATE INDEX records_dedupe ON records (account_id, entity_id, dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE INDEX records_updated ON records (account_id, updated_at, id);

-- History of a record: every change, note, document and stage move (decisions §10).
CREATE TABLE record_events (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  record_id uuid NOT NULL,
  type text NOT NULL,
  message text NOT NULL,
  actor text NOT NULL DEFAULT 'api',
  data jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz(3) NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, record_id) REFERENCES records(account_id, id) ON DELETE CASCADE
);
CREATE INDEX record_events_record ON record_events (account_id, record_id, created_at DESC);

CREATE TABLE stage_history (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  record_id uuid NOT NULL,
  pipeline_id uuid NOT NULL,
  stage_id uuid NOT NULL,
  entered_at timestamptz(3) NOT NULL DEFAULT now(),
  left_at timestamptz(3),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, record_id) REFERENCES records(account_id, id) ON DELETE CASCADE
);
CREATE INDEX stage_history_record ON stage_history (account_id, record_id, entered_at);

CREATE TABLE notes (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  record_id uuid NOT NULL,
  kind text NOT NULL DEFAULT 'general',
  body text NOT NULL,
  tag text,
  sender text NOT NULL DEFAULT 'api',
  sender_name text,
  idempotency_key text,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, record_id) REFERENCES records(account_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX notes_idempotency ON notes (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE TABLE documents (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  record_id uuid NOT NULL,
  field text,
  name text NOT NULL,
  mime text NOT NULL,
  size bigint NOT NULL,
  sha256 text NOT NULL,
  storage_key text NOT NULL,
  source_url text,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, record_id) REFERENCES records(account_id, id) ON DELETE CASCADE
);
CREATE INDEX documents_record ON documents (account_id, record_id);
-- Signed document addresses carry only the document id.
CREATE UNIQUE INDEX documents_id ON documents (id);

CREATE TABLE record_tokens (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  record_id uuid NOT NULL,
  token_hash bytea NOT NULL,
  fields text[] NOT NULL,
  expires_at timestamptz(3) NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  revoked_at timestamptz(3),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, record_id) REFERENCES records(account_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX record_tokens_hash ON record_tokens (token_hash);

-- Idempotency keys (decisions §4): a row is claimed in its own short transaction before the
-- work starts ('running'), and holds the stored answer once done. A claim whose lease ran out
-- (the process died) may be taken over.
CREATE TABLE idempotency_keys (
  account_id uuid NOT NULL,
  scope text NOT NULL,
  key text NOT NULL,
  request_hash text NOT NULL,
  state text NOT NULL,
  status_code integer,
  response jsonb,
  lease_until timestamptz(3) NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  expires_at timestamptz(3) NOT NULL,
  PRIMARY KEY (account_id, scope, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

-- Every intake call's outcome, readable by the account (decisions §10).
CREATE TABLE intake_log (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  request_id text NOT NULL,
  endpoint text NOT NULL,
  outcome text NOT NULL,
  status_code integer NOT NULL,
  record_id uuid,
  entity_key text,
  source text,
  warnings jsonb NOT NULL DEFAULT '[]',
  error text,
  created_at timestamptz(3) NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (account_id, id)
);
CREATE INDEX intake_log_created ON intake_log (account_id, created_at DESC, id DESC);

-- CRM automations, configured per target stage (decisions §7).
CREATE TABLE automations (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  stage_id uuid NOT NULL,
  name text NOT NULL,
  action text NOT NULL,
  config jsonb NOT NULL DEFAULT '{}',
  position integer NOT NULL DEFAULT 0,
  enabled boolean NOT NULL DEFAULT true,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, stage_id) REFERENCES stages(account_id, id) ON DELETE CASCADE
);
CREATE INDEX automations_stage ON automations (account_id, stage_id, position);

-- Outbound webhooks to account subscribers (decisions §10).
CREATE TABLE webhooks (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  url text NOT NULL,
  events text[] NOT NULL,
  secret text NOT NULL,
  enabled boolean NOT NULL DEFAULT true,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id)
);

-- Distribution module (decisions §8).
CREATE TABLE partners (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text NOT NULL,
  contact_person text NOT NULL DEFAULT '',
  email text NOT NULL DEFAULT '',
  phone text NOT NULL DEFAULT '',
  street text NOT NULL DEFAULT '',
  postal_code text NOT NULL DEFAULT '',
  city text NOT NULL DEFAULT '',
  country text NOT NULL DEFAULT '',
  vat_id text NOT NULL DEFAULT '',
  billing_address_differs boolean NOT NULL DEFAULT false,
  billing_name text,
  billing_street text,
  billing_postal_code text,
  billing_city text,
  billing_country text,
  billing_email text,
  buyer_reference text NOT NULL DEFAULT '',
  wants_e_invoice boolean NOT NULL DEFAULT false,
  portal_right_contact text NOT NULL DEFAULT 'view',
  portal_right_billing text NOT NULL DEFAULT 'view',
  retired boolean NOT NULL DEFAULT false,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  updated_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id)
);
CREATE UNIQUE INDEX partners_name ON partners (account_id, lower(name));

CREATE TABLE distributions (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  entity_id uuid NOT NULL,
  name text NOT NULL,
  return_deadline_days integer NOT NULL DEFAULT 14,
  redistribute_on_return boolean NOT NULL DEFAULT false,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, entity_id) REFERENCES entities(account_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX distributions_entity ON distributions (account_id, entity_id);

CREATE TABLE participations (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  distribution_id uuid NOT NULL,
  partner_id uuid NOT NULL,
  channel text NOT NULL,
  address text NOT NULL,
  secret text NOT NULL,
  price_cents integer NOT NULL,
  currency text NOT NULL DEFAULT 'EUR',
  cap_per_day integer,
  cap_per_month integer,
  weekdays integer[] NOT NULL DEFAULT '{1,2,3,4,5,6,7}',
  hours_from smallint,
  hours_to smallint,
  paused boolean NOT NULL DEFAULT false,
  weight integer NOT NULL DEFAULT 1,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, distribution_id) REFERENCES distributions(account_id, id) ON DELETE CASCADE,
  FOREIGN KEY (account_id, partner_id) REFERENCES partners(account_id, id)
);

CREATE TABLE distribution_rules (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  distribution_id uuid NOT NULL,
  name text NOT NULL,
  position integer NOT NULL DEFAULT 0,
  filter jsonb NOT NULL DEFAULT '[]',
  strategy text NOT NULL DEFAULT 'all',
  max_partners integer NOT NULL DEFAULT 1,
  participation_ids uuid[] NOT NULL DEFAULT '{}',
  round_robin_cursor integer NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, distribution_id) REFERENCES distributions(account_id, id) ON DELETE CASCADE
);

CREATE TABLE distribution_runs (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  distribution_id uuid NOT NULL,
  record_id uuid NOT NULL,
  status text NOT NULL,
  reason text,
  triggered_by text NOT NULL,
  started_at timestamptz(3) NOT NULL DEFAULT now(),
  finished_at timestamptz(3),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, record_id) REFERENCES records(account_id, id) ON DELETE CASCADE
);
CREATE INDEX distribution_runs_record ON distribution_runs (account_id, record_id);

CREATE TABLE deliveries (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  run_id uuid NOT NULL,
  record_id uuid NOT NULL,
  participation_id uuid NOT NULL,
  partner_id uuid NOT NULL,
  rule_name text NOT NULL,
  channel text NOT NULL,
  status text NOT NULL DEFAULT 'pending',
  price_cents integer NOT NULL,
  currency text NOT NULL,
  attempts integer NOT NULL DEFAULT 0,
  error text,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  delivered_at timestamptz(3),
  returned_at timestamptz(3),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, run_id) REFERENCES distribution_runs(account_id, id) ON DELETE CASCADE
);
CREATE INDEX deliveries_list ON deliveries (account_id, created_at DESC, id DESC);
CREATE INDEX deliveries_partner ON deliveries (account_id, partner_id, created_at DESC);

CREATE TABLE return_reasons (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text NOT NULL,
  PRIMARY KEY (account_id, id)
);

CREATE TABLE delivery_returns (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  delivery_id uuid NOT NULL,
  reason_id uuid,
  text text,
  reported_by text,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, delivery_id) REFERENCES deliveries(account_id, id) ON DELETE CASCADE
);

-- Booking module.
CREATE TABLE calendars (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  name text NOT NULL,
  timezone text NOT NULL DEFAULT 'UTC',
  slot_minutes integer NOT NULL DEFAULT 30,
  availability jsonb NOT NULL DEFAULT '[]',
  PRIMARY KEY (account_id, id)
);

CREATE TABLE booking_links (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  record_id uuid NOT NULL,
  calendar_id uuid,
  token_hash bytea NOT NULL,
  title text,
  duration_minutes integer,
  expires_at timestamptz(3) NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, record_id) REFERENCES records(account_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX booking_links_token ON booking_links (token_hash);

CREATE TABLE appointments (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  record_id uuid NOT NULL,
  calendar_id uuid,
  title text NOT NULL,
  starts_at timestamptz(3) NOT NULL,
  ends_at timestamptz(3) NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, record_id) REFERENCES records(account_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX appointments_slot ON appointments (account_id, calendar_id, starts_at);

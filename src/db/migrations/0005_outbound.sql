-- Outbound messages (webhooks and email): the message table is itself the outbox. A module writes
-- a message row in the transaction of the change that causes it; a dispatcher in the workers
-- claims due rows (FOR UPDATE SKIP LOCKED, a lease in claimed_until), sends, and writes the
-- attempt and the next due time.

-- Where webhooks go: account webhooks now (purpose 'account'), later automations and partner
-- participations. Secrets are encrypted with the instance secret (they must be readable to sign).
CREATE TABLE webhook_destinations (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  purpose text NOT NULL,
  url text NOT NULL,
  secret text NOT NULL,
  previous_secret text,
  previous_secret_until timestamptz(3),
  enabled boolean NOT NULL DEFAULT true,
  disabled_reason text,
  failing_since timestamptz(3),
  -- Account webhooks: the event names subscribed ('*' for all) and a description.
  events text[] NOT NULL DEFAULT '{}',
  description text,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  updated_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id)
);
CREATE INDEX webhook_destinations_listing ON webhook_destinations (account_id, purpose, created_at, id);

CREATE TABLE outbound_messages (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  channel text NOT NULL,
  destination_id uuid,
  event_type text NOT NULL,
  -- Webhooks: the body ({type, timestamp, data}); email: {to, subject, text, html, attachments}.
  payload jsonb NOT NULL,
  status text NOT NULL DEFAULT 'pending',
  attempts integer NOT NULL DEFAULT 0,
  max_attempts integer,
  -- When the next attempt is due.
  next_attempt_at timestamptz(3) NOT NULL DEFAULT now(),
  -- While claimed: the claim and when its lease runs out. Neither is indexed, so that a claim is
  -- a heap-only update (no new index entries) and the row keeps its place in the due index.
  claim_id uuid,
  claimed_until timestamptz(3),
  last_error text,
  -- A module that wants to learn each attempt's outcome names its hook and its own reference.
  notify text,
  ref text,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  finished_at timestamptz(3),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, destination_id) REFERENCES webhook_destinations(account_id, id) ON DELETE CASCADE
) WITH (fillfactor = 70);
CREATE INDEX outbound_messages_due ON outbound_messages (next_attempt_at) WHERE status = 'pending';
CREATE INDEX outbound_messages_age ON outbound_messages (created_at);

CREATE TABLE outbound_attempts (
  account_id uuid NOT NULL,
  id uuid NOT NULL,
  message_id uuid NOT NULL,
  destination_id uuid,
  attempt integer NOT NULL,
  outcome text NOT NULL,
  status_code integer,
  reply text,
  error text,
  duration_ms integer NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  -- Led by the message, so that the key also serves deleting a message's attempts.
  PRIMARY KEY (account_id, message_id, id),
  FOREIGN KEY (account_id, message_id) REFERENCES outbound_messages(account_id, id) ON DELETE CASCADE
);
CREATE INDEX outbound_attempts_destination ON outbound_attempts (account_id, destination_id, created_at, id);

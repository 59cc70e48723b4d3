-- The stage moves `move_stage` automations made for one originating request (decisions §7: "a
-- chain of move_stage automations stops after 10 moves caused by one request"; docs/decisions.md,
-- CRM module). The id is the chain's origin, minted by the request's move and carried in every
-- automation job that follows from it; each automation move adds one in its own transaction, so
-- that concurrent runs of one chain count every move once. Purged with the run marks.
CREATE TABLE automation_chains (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  moves integer NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id)
);
CREATE INDEX automation_chains_created ON automation_chains (created_at);

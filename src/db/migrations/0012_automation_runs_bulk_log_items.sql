-- One row per automation run that took effect (decisions: CRM module). Its id is the job's id,
-- the same for every retry of one run, and it is written in the transaction of the run's effect
-- (the move, the note's result, the queued message, the failure), so that a retry after a crash
-- between that commit and the job's completion finds it and does nothing a second time.
CREATE TABLE automation_runs (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  automation_id uuid NOT NULL,
  record_id uuid NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id)
);
CREATE INDEX automation_runs_created ON automation_runs (created_at);

-- One intake-log entry per call (decisions §10): a bulk call's entry lists each entry's outcome
-- here (`[{index, status, record_id | error, …}]`); null for single-record calls.
ALTER TABLE intake_log ADD COLUMN items jsonb;

-- A successful attempt written without an outcome hook (account webhooks, plain email) is kept on
-- its message row, by the statement that marks the message delivered, instead of an attempt row:
-- `outbound_attempts` holds failures and the attempts of messages with a hook. The attempts
-- listing reads the kept attempt from the message (its id is the message's id, its time
-- `finished_at`, its number `attempts`).
ALTER TABLE outbound_messages ADD COLUMN status_code integer;
ALTER TABLE outbound_messages ADD COLUMN reply text;
ALTER TABLE outbound_messages ADD COLUMN duration_ms integer;
-- The kept attempts of a destination, newest first (only delivered rows have entries).
CREATE INDEX outbound_messages_kept_attempts ON outbound_messages (account_id, destination_id, finished_at, id)
  WHERE duration_ms IS NOT NULL;
-- Pruning by age reads a block range index: rows go in roughly in created_at order, and a range
-- index takes no entry per row (the B-tree took one with each message and one more with each
-- non-heap-only update of it).
DROP INDEX outbound_messages_age;
CREATE INDEX outbound_messages_age ON outbound_messages USING brin (created_at);

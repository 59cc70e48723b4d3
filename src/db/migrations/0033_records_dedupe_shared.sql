-- A record's duplicate-rule values were indexed twice when its entity's rule is unique (`update`
-- or `ignore`, most entities): in `records_dedupe` (every record with a key) and in
-- `records_dedupe_unique`. Each is a b-tree keyed by a hash-like value, so every created record
-- paid one more random index insertion, and on a large table one more page written in full after
-- each checkpoint. `records_dedupe_shared` replaces it and holds only the records the unique index
-- does not: look-ups by key read both (records.repo.ts, findByDedupeKey). `created_at` is in the
-- key because that look-up wants the oldest record. Building it reads the table once; it holds
-- few rows.
DROP INDEX IF EXISTS records_dedupe;
CREATE INDEX records_dedupe_shared ON records (account_id, entity_id, dedupe_key, created_at)
  WHERE dedupe_key IS NOT NULL AND NOT dedupe_unique;

-- A record whose duplicate rule matches on its email alone under a unique rule (`update` or
-- `ignore`: the common setup) stood twice under the same address: in `records_email` by
-- (account, email) and in `records_dedupe_unique` by (account, entity, key), where the key is that
-- same address. Both are b-trees keyed by a hash-like value, so every such record paid one more
-- random index insertion, and on a large table one more page written in full after each
-- checkpoint (migration 0033 removed the other copy). `records_email_rest` holds only the records
-- `records_dedupe_unique` does not already find by their address; look-ups by email read both
-- (records.repo.ts, `emailMatches`). Building it reads the table once; writes to records wait
-- meanwhile.
DROP INDEX IF EXISTS records_email;
CREATE INDEX IF NOT EXISTS records_email_rest ON records (account_id, email_lc)
  WHERE email_lc IS NOT NULL AND (NOT dedupe_unique OR dedupe_key IS DISTINCT FROM email_lc);

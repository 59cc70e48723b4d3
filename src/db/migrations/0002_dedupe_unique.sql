-- Records of entities whose duplicate rule is `update` or `ignore` may not share duplicate-rule
-- values: the database enforces it, so that intake can create a record in one statement
-- (INSERT … ON CONFLICT DO NOTHING) without a lock, and fall back to the update path on conflict.
ALTER TABLE records ADD COLUMN dedupe_unique boolean NOT NULL DEFAULT false;
CREATE UNIQUE INDEX records_dedupe_unique ON records (account_id, entity_id, dedupe_key) WHERE dedupe_unique;

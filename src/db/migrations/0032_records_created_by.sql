-- Who created a record, as the history names actors (`api:<key name>`, `source:<name>`,
-- `user:<email>`, `api`). The creation entry of a record's history is made from its row; without
-- this column it could only say "the API" or the record's `source`, which is the sender's own
-- `meta.source` text, not the credential that sent it. Rows from before stay NULL and keep that
-- older reading. No default: adding the column rewrites nothing.
ALTER TABLE records ADD COLUMN IF NOT EXISTS created_by text;

-- Lists of records newest first (`GET /api/v1/records?order=newest`, the web console's record
-- list and its pipeline board) read an account's records by creation time. Without an index of
-- that order PostgreSQL sorted all of the account's records for each page: 0.5–1 s a page at
-- 1,000,000 records. This index (read backwards) gives a page from its first rows. Creation
-- times only grow, so new entries go to its right-hand end, as the ids' do (migration 0021).
CREATE INDEX IF NOT EXISTS records_created ON records (account_id, created_at, id);

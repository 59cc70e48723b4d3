-- Document bytes in the database, for LEADS_FILES_STORAGE=database (decisions §1): a file is
-- kept in chunks of at most 256 KiB, numbered from 0 (an empty file is one empty chunk), so that
-- a download reads one chunk at a time and no statement carries a whole 25 MiB document. The
-- chunks of a file are written in one transaction once it has arrived whole and within its
-- limit: a failed fetch leaves no row. `key` is the storage key that documents.storage_key names.
CREATE TABLE document_file_chunks (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  key text NOT NULL,
  seq integer NOT NULL,
  bytes bytea NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, key, seq)
);
-- Documents are mostly compressed already (PDF, images): stored out of line without another try.
ALTER TABLE document_file_chunks ALTER COLUMN bytes SET STORAGE EXTERNAL;

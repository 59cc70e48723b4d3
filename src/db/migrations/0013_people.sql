-- People (decisions §14): users with roles and passwords, server-side sessions, one-time
-- sign-in links, and the failed sign-ins that the sign-in limit counts.
ALTER TABLE users ADD COLUMN role text NOT NULL DEFAULT 'member';
ALTER TABLE users ADD CONSTRAINT users_role CHECK (role IN ('owner', 'admin', 'member', 'viewer'));
-- argon2id in PHC form; null until the person sets a password (a sign-in link still works).
ALTER TABLE users ADD COLUMN password_hash text;
ALTER TABLE users ADD COLUMN updated_at timestamptz(3) NOT NULL DEFAULT now();
-- The account's first user is its owner, also for accounts that had users before roles.
UPDATE users SET role = 'owner'
WHERE (account_id, id) IN (
  SELECT DISTINCT ON (account_id) account_id, id FROM users ORDER BY account_id, created_at, id
);
-- Sign-in finds a person by email across accounts.
CREATE INDEX users_email_any ON users (lower(email));

CREATE TABLE sessions (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  user_id uuid NOT NULL,
  -- SHA-256 of the cookie's value; the value itself is never stored.
  token_hash bytea NOT NULL,
  -- How the session was started: 'password' or 'link'.
  via text NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  last_seen_at timestamptz(3) NOT NULL DEFAULT now(),
  -- The absolute end; the idle end is last_seen_at plus the idle lifetime.
  expires_at timestamptz(3) NOT NULL,
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, user_id) REFERENCES users(account_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX sessions_token ON sessions (token_hash);
CREATE INDEX sessions_user ON sessions (account_id, user_id);

CREATE TABLE sign_in_tokens (
  account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  id uuid NOT NULL,
  user_id uuid NOT NULL,
  token_hash bytea NOT NULL,
  expires_at timestamptz(3) NOT NULL,
  used_at timestamptz(3),
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id),
  FOREIGN KEY (account_id, user_id) REFERENCES users(account_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX sign_in_tokens_hash ON sign_in_tokens (token_hash);

-- Failed sign-ins of the last minutes, per email and per client address (instance-wide, so the
-- account_id is the nil uuid as in instance_settings); every node counts the same rows.
CREATE TABLE sign_in_failures (
  account_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
  id uuid NOT NULL,
  subject text NOT NULL,
  failed_at timestamptz(3) NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id)
);
CREATE INDEX sign_in_failures_subject ON sign_in_failures (subject, failed_at);
CREATE INDEX sign_in_failures_at ON sign_in_failures (failed_at);

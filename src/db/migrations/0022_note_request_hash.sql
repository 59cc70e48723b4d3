-- A note added with an idempotency key keeps the hash of what was asked (record or email,
-- entity, kind, body), so that the same key with another request answers 422
-- idempotency_key_reused instead of handing back a note that was not asked for (decisions §4).
-- Notes written before carry none and are replayed as before.
ALTER TABLE notes ADD COLUMN request_hash text;

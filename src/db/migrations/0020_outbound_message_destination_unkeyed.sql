-- Messages no longer have a foreign key to their destination. The key's check took a key-share
-- lock on the destination's row in every transaction that wrote a message to it, so that all of
-- intake's concurrent statements for an account with a webhook locked one row (a multixact per
-- overlap) and the check ran per message row. Deleting a destination deletes its messages in the
-- same statement instead (outbound.repo `deleteDestination`, and `deleteMessagesOf` for
-- participations); a message written for a destination deleted meanwhile fails without a
-- request (`destination_missing`).
ALTER TABLE outbound_messages DROP CONSTRAINT IF EXISTS outbound_messages_account_id_destination_id_fkey;

-- A record's creation (records.created_at, source) and its current stage (stage_id,
-- stage_entered_at) are facts of its row; the history tables hold what happened after: events
-- other than the creation, and stage stays that ended (a stage move writes the stay it ends).
-- The copies that intake wrote until now go, so that no history shows them twice.
DELETE FROM record_events WHERE type = 'lead_created';
DELETE FROM stage_history WHERE left_at IS NULL;

-- Whether a return was made with redistribution (the distribution's `redistribute_on_return` at
-- that moment): such a return leaves the record open to a later run when the redistribution
-- reached no partner (docs/decisions.md, Distribution runs). Returns made before are marked when
-- a redistribution run was written with them (same transaction, so the same time); a return whose
-- distribution was switched off at that moment wrote no run and stays closed.
ALTER TABLE delivery_returns ADD COLUMN redistribute boolean NOT NULL DEFAULT false;
CREATE INDEX delivery_returns_delivery ON delivery_returns (account_id, delivery_id);
UPDATE delivery_returns r SET redistribute = true
FROM deliveries d
WHERE d.account_id = r.account_id AND d.id = r.delivery_id
  AND EXISTS (
    SELECT 1 FROM distribution_runs x
    WHERE x.account_id = d.account_id AND x.record_id = d.record_id
      AND x.triggered_by = 'return' AND x.started_at = r.created_at
  );

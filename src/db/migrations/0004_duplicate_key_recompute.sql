-- A changed duplicate rule recomputes the stored duplicate keys of the entity's records in a
-- background job (src/modules/entities/duplicate-keys.ts). Its progress lives on the entity row,
-- so that it resumes after a restart and shows in the entity's settings: the rule's version
-- (each change counts up; a job of an older version stops), the last record id done, how many
-- records are done, and how many there were when the rule changed.
ALTER TABLE entities ADD COLUMN dedupe_rule_version integer NOT NULL DEFAULT 0;
ALTER TABLE entities ADD COLUMN dedupe_recomputing boolean NOT NULL DEFAULT false;
ALTER TABLE entities ADD COLUMN dedupe_recompute_cursor uuid;
ALTER TABLE entities ADD COLUMN dedupe_recompute_done integer NOT NULL DEFAULT 0;
ALTER TABLE entities ADD COLUMN dedupe_recompute_total integer NOT NULL DEFAULT 0;

-- Website forms (decisions §13): what a source's intake does for a browser's form post.
-- Addresses a browser is sent to after its post (303); null answers with the service's own page.
ALTER TABLE sources ADD COLUMN success_url text;
ALTER TABLE sources ADD COLUMN error_url text;
-- Origins (scheme://host[:port]) whose pages may post to the source; empty lets any origin post.
ALTER TABLE sources ADD COLUMN allowed_origins text[] NOT NULL DEFAULT '{}';
-- The trap field bots fill and people never see; null sets no trap.
ALTER TABLE sources ADD COLUMN honeypot_field text DEFAULT '_hp';
-- Posts a minute one client address may make to this source.
ALTER TABLE sources ADD COLUMN rate_limit_per_minute integer NOT NULL DEFAULT 60;

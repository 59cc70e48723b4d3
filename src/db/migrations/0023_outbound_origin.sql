-- What sent a message, where its attempts are listed by that rather than by a webhook destination:
-- a CRM automation (`GET /api/v1/settings/automations/{id}/attempts`), whose email messages have
-- no destination. Each attempt row carries its message's origin, so that the listing reads one
-- index, newest first, as the destinations' listing does.
ALTER TABLE outbound_messages ADD COLUMN IF NOT EXISTS origin_id uuid;
ALTER TABLE outbound_attempts ADD COLUMN IF NOT EXISTS origin_id uuid;
CREATE INDEX IF NOT EXISTS outbound_attempts_origin ON outbound_attempts (account_id, origin_id, created_at, id)
  WHERE origin_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS outbound_messages_kept_origin ON outbound_messages (account_id, origin_id, finished_at, id)
  WHERE origin_id IS NOT NULL AND duration_ms IS NOT NULL;

-- Messages automations sent before: each names its automation in `ref` (JSON, see
-- automations.service.ts), webhook and email alike. Other modules' refs need not be JSON: the
-- CASE reads `ref` as JSON only for an automation's message (a WHERE's conditions may be
-- evaluated in any order).
UPDATE outbound_messages SET origin_id = (ref::jsonb ->> 'automation')::uuid
WHERE CASE WHEN notify = 'crm.automation' AND ref IS NOT NULL THEN (ref::jsonb ->> 'automation') IS NOT NULL
  ELSE false END;
UPDATE outbound_attempts a SET origin_id = m.origin_id
FROM outbound_messages m
WHERE m.account_id = a.account_id AND m.id = a.message_id AND m.origin_id IS NOT NULL;

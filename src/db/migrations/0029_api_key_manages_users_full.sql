-- Managing users makes owners, and an owner may do everything, so a key may manage users only
-- when it holds every permission (docs/decisions.md, People and sessions). Keys made before
-- with fewer permissions lose it; keys holding all eight keep what they had.
UPDATE api_keys SET manages_users = false
WHERE manages_users
  AND NOT (permissions @> ARRAY['records:read', 'records:write', 'notes:write', 'documents:read', 'crm', 'distribution', 'booking', 'settings']::text[]);

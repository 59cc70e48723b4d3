-- Users and roles are the owner's (decisions §14). A key made by a signed-in admin carries the
-- settings permission but may not manage users, so that no admin can make themselves owner
-- through a key; keys made by the operator, an owner, or a key that may, can. Keys made before
-- keep what they could do.
ALTER TABLE api_keys ADD COLUMN manages_users boolean NOT NULL DEFAULT true;

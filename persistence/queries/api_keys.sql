-- name: insert_api_key
-- A new key (its group membership, if any, is added in the same transaction).
INSERT INTO api_keys (id, name, owner, group_id, secret_hash) VALUES ($1, $2, $3, $4, $5)
RETURNING *;

-- name: live_api_key
-- A key that has not been revoked.
SELECT * FROM api_keys WHERE id = $1 AND revoked_at IS NULL;

-- name: list_api_keys
-- The keys a user made (every key for NULL), newest first.
SELECT * FROM api_keys WHERE $1::text IS NULL OR owner = $1 ORDER BY created_at DESC, id DESC;

-- name: revoke_api_key
-- Revokes a key once; returns it.
UPDATE api_keys SET revoked_at = now()
 WHERE id = $1 AND revoked_at IS NULL AND ($2::text IS NULL OR owner = $2)
RETURNING *;

-- name: lock_user_api_keys
-- Serializes key making of one user, so that two at once cannot pass the limit together.
SELECT pg_advisory_xact_lock(hashtextextended('api_keys:' || $1, 0));

-- name: count_live_api_keys
-- How many live keys a user holds.
SELECT count(*) FROM api_keys WHERE owner = $1 AND revoked_at IS NULL;

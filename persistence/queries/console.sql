-- name: insert_login_code
-- A one-time sign-in code, stored by its hash.
INSERT INTO console_login_codes (code_hash, user_name, role, expires_at)
VALUES ($1, $2, $3, now() + make_interval(secs => $4));

-- name: use_login_code
-- Spends a code: only an unused, unexpired one returns its user, and only once.
UPDATE console_login_codes SET used_at = now()
 WHERE code_hash = $1 AND used_at IS NULL AND expires_at > now()
RETURNING user_name, role;

-- name: insert_console_session
-- A browser session, stored by the hash of its id, with its CSRF token.
INSERT INTO console_sessions (id_hash, user_name, role, csrf_token, expires_at)
VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5));

-- name: get_console_session
-- A live session (not revoked, not expired) by the hash of its id.
SELECT user_name, role, csrf_token, expires_at FROM console_sessions
 WHERE id_hash = $1 AND revoked_at IS NULL AND expires_at > now();

-- name: revoke_console_session
-- Signs a session out; a second sign-out is a no-op.
UPDATE console_sessions SET revoked_at = now() WHERE id_hash = $1 AND revoked_at IS NULL;

-- name: delete_stale_console_rows
-- Forgets codes and sessions that ended more than a day ago (run at each sign-in).
WITH codes AS (
    DELETE FROM console_login_codes WHERE expires_at < now() - interval '1 day'
)
DELETE FROM console_sessions
 WHERE expires_at < now() - interval '1 day' OR revoked_at < now() - interval '1 day';

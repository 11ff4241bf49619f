-- name: set_claims
-- Whom the connection's queries run for, read by the row-level security policies (migration
-- 022): $1 the user (NULL: nobody), $2 `user`, `service` or `authenticator`. Session-level,
-- cleared by the pool's RESET ALL when the connection goes back.
SELECT set_config('waystation.user', COALESCE($1::text, ''), false),
       set_config('waystation.role', $2::text, false);

-- name: login_password_statement
-- The statement that gives a login role ($1) its password ($2), quoted by the server: ALTER
-- ROLE takes no parameters. Run by `waystation migrate` as the owner.
SELECT format('ALTER ROLE %I WITH LOGIN PASSWORD %L', $1::text, $2::text);

-- name: set_claims
-- Whom the connection's queries run for, read by the row-level security policies (migration
-- 022): $1 the user (NULL: nobody), $2 `user`, `service` or `authenticator`. Session-level,
-- cleared by the pool's RESET ALL when the connection goes back.
SELECT set_config('waystation.user', COALESCE($1::text, ''), false),
       set_config('waystation.role', $2::text, false);

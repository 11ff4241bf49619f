-- Browser sign-in for the web console: one-time sign-in codes (printed by
-- `waystation console-link`) and the sessions they are exchanged for. Only SHA-256 hashes of
-- codes and session ids are stored, so a copy of the table signs nobody in.

CREATE TABLE IF NOT EXISTS console_login_codes (
    code_hash   text PRIMARY KEY,
    user_name   text NOT NULL,
    role        text NOT NULL CHECK (role IN ('user', 'service')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);

CREATE TABLE IF NOT EXISTS console_sessions (
    id_hash     text PRIMARY KEY,
    user_name   text NOT NULL,
    role        text NOT NULL CHECK (role IN ('user', 'service')),
    csrf_token  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    revoked_at  timestamptz
);
CREATE INDEX IF NOT EXISTS idx_console_sessions_expires_at ON console_sessions (expires_at);
CREATE INDEX IF NOT EXISTS idx_console_login_codes_expires_at ON console_login_codes (expires_at);

-- API keys for services (issue 13): shown once, stored as a hash, revocable. A key acts as the
-- user who made it, or, scoped to a group, as its own member of that group with a role.

CREATE TABLE api_keys (
    id           uuid PRIMARY KEY,
    name         text NOT NULL,
    owner        text NOT NULL,
    group_id     uuid REFERENCES groups (id) ON DELETE CASCADE,
    -- SHA-256 of the key's 32 random bytes: enough for a secret nobody chose (no password
    -- hashing needed), and a stolen table gives no key.
    secret_hash  text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);
CREATE INDEX idx_api_keys_owner ON api_keys (owner);

-- Email to the people who may decide a request (issue 13): where to write to each user, and
-- one signed, single-use, expiring link per (request, person).

CREATE TABLE user_contacts (
    user_name   text PRIMARY KEY,
    email       text NOT NULL CHECK (email ~ '^[^@\s]+@[^@\s]+$'),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE decision_links (
    id          uuid PRIMARY KEY,
    request_id  uuid NOT NULL REFERENCES hitl_requests (id) ON DELETE CASCADE,
    -- The person the link decides as: the token is theirs alone.
    user_name   text NOT NULL,
    email       text NOT NULL,
    expires_at  timestamptz NOT NULL,
    sent_at     timestamptz,
    used_at     timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (request_id, user_name)
);

-- Gates in Slack (issue 41): who a Slack user is here, the one-time codes that link them, the
-- messages that show each request (so each is updated when the request changes), and the
-- signatures of the requests Slack sent (so a replayed one is refused).

-- A Slack user linked to a Waystation user. Made with an API key: ends when that key is revoked
-- (a group key is revoked when its maker leaves the group, migration 035); any link ends with
-- the user's erasure (persistence/erasure.py) and is refused once their tokens are cut off.
CREATE TABLE slack_users (
    team_id     text NOT NULL,
    slack_user  text NOT NULL,
    user_name   text NOT NULL,
    api_key_id  uuid REFERENCES api_keys (id) ON DELETE CASCADE,
    linked_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, slack_user)
);
CREATE INDEX idx_slack_users_user ON slack_users (user_name);

-- `/waystation link`'s one-time codes: the database keeps their hash only.
CREATE TABLE slack_link_codes (
    code_hash   text PRIMARY KEY,
    team_id     text NOT NULL,
    slack_user  text NOT NULL,
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);

-- One message per request and audience (a channel, or a person's DM as `dm:<user>`): where it
-- is (channel id and ts, once posted), what it last showed, which thread replies it has, and
-- its send log (attempts and the last error), read by whoever wonders why a message is late.
CREATE TABLE slack_messages (
    request_id   uuid NOT NULL REFERENCES hitl_requests (id) ON DELETE CASCADE,
    audience     text NOT NULL,
    channel      text,
    ts           text,
    shown        text,
    reminders    int NOT NULL DEFAULT 0,
    escalated    boolean NOT NULL DEFAULT false,
    attempts     int NOT NULL DEFAULT 0,
    last_error   text,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (request_id, audience)
);

-- Signatures of the requests Slack sent, for as long as their timestamp is accepted (5 minutes).
CREATE TABLE slack_requests_seen (
    signature  text PRIMARY KEY,
    seen_at    timestamptz NOT NULL DEFAULT now()
);

GRANT SELECT, INSERT, UPDATE, DELETE ON slack_users, slack_link_codes, slack_messages,
    slack_requests_seen TO waystation_api, waystation_worker;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['slack_users', 'slack_link_codes', 'slack_messages',
                             'slack_requests_seen'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY worker_all ON %I TO waystation_worker '
                       'USING (true) WITH CHECK (true)', t);
    END LOOP;
END
$$;
-- A request from Slack is known by its signature and its Slack user before anyone here is:
-- the `authenticator` claims read the links, codes and signatures, as they read credentials.
CREATE POLICY api_visible ON slack_users TO waystation_api
    USING (waystation_claims_role() IN ('service', 'authenticator')
           OR user_name = waystation_user());
CREATE POLICY api_visible ON slack_link_codes TO waystation_api
    USING (waystation_claims_role() IN ('service', 'authenticator'));
CREATE POLICY api_visible ON slack_requests_seen TO waystation_api
    USING (waystation_claims_role() IN ('service', 'authenticator'));
CREATE POLICY api_visible ON slack_messages TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR EXISTS (SELECT 1 FROM hitl_requests g WHERE g.id = slack_messages.request_id));

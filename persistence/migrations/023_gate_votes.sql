-- People around a gate (issue 13): who may decide besides roles, a quorum with one vote row
-- per approver (and the digest each one saw), delegated votes, typed answers, and the
-- reminders and escalations of a request that waits.

ALTER TABLE hitl_requests ADD COLUMN decider_users text[] NOT NULL DEFAULT '{}';
ALTER TABLE hitl_requests ADD COLUMN quorum int NOT NULL DEFAULT 1 CHECK (quorum >= 1);
-- A typed answer: the JSON Schema it must satisfy (part of the digest), the document offered
-- for editing ("approve with edits"), and the answer the decision carried. The agent run's
-- edited tool arguments (migration 011) were the first typed answer.
ALTER TABLE hitl_requests ADD COLUMN answer_schema jsonb;
ALTER TABLE hitl_requests ADD COLUMN answer_initial jsonb;
ALTER TABLE hitl_requests RENAME COLUMN decision_arguments TO answer;
ALTER TABLE hitl_requests ADD COLUMN reminders_sent int NOT NULL DEFAULT 0;
ALTER TABLE hitl_requests ADD COLUMN escalated_at timestamptz;

CREATE TABLE gate_votes (
    request_id    uuid NOT NULL REFERENCES hitl_requests (id) ON DELETE CASCADE,
    -- Who cast it, and whose vote it is (the same person unless it was delegated).
    voter         text NOT NULL,
    on_behalf_of  text NOT NULL,
    option        text NOT NULL,
    feedback      text,
    answer        jsonb,
    digest        text NOT NULL,
    voted_at      timestamptz NOT NULL,
    PRIMARY KEY (request_id, on_behalf_of)
);
CREATE INDEX idx_gate_votes_voter ON gate_votes (voter, request_id);

CREATE TABLE gate_delegations (
    request_id    uuid NOT NULL REFERENCES hitl_requests (id) ON DELETE CASCADE,
    from_user     text NOT NULL,
    to_user       text NOT NULL,
    delegated_at  timestamptz NOT NULL,
    PRIMARY KEY (request_id, from_user)
);
CREATE INDEX idx_gate_delegations_to ON gate_delegations (to_user, request_id);

-- The gate rules a run was started with (`POST /runs` "gates"), kept to start it again the
-- same way after a failed start and to show them.
ALTER TABLE runs ADD COLUMN gate_policies jsonb;

-- The last reminder mailed with each link (a retried reminder mails nobody twice).
ALTER TABLE decision_links ADD COLUMN reminded int NOT NULL DEFAULT 0;

-- Inbox streams hear of votes, delegations and escalations too (each touches updated_at), and
-- the payload names everyone a request concerns: named deciders, delegates, who has voted.
CREATE OR REPLACE FUNCTION notify_gate_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('waystation_gates', json_build_object(
        'request_id', NEW.id, 'run_id', NEW.run_id, 'status', NEW.status,
        'owner', r.owner, 'group_id', r.group_id, 'decider_roles', NEW.decider_roles,
        'decider_users', NEW.decider_users,
        'delegates', ARRAY(SELECT d.to_user FROM gate_delegations d WHERE d.request_id = NEW.id),
        'voters', ARRAY(SELECT v.voter FROM gate_votes v WHERE v.request_id = NEW.id))::text)
       FROM runs r WHERE r.id = NEW.run_id;
    RETURN NULL;
END
$$;
DROP TRIGGER hitl_requests_notify ON hitl_requests;
CREATE TRIGGER hitl_requests_notify
AFTER INSERT OR UPDATE OF status, decider_roles, updated_at ON hitl_requests
FOR EACH ROW EXECUTE FUNCTION notify_gate_change();

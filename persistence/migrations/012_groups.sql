-- Groups of people around runs (issue 13, seed 003's weddings and wedding_members): a run may
-- belong to a group, whose members read it; members whose role a gate names decide it.

CREATE TABLE groups (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE group_members (
    group_id    uuid NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    user_name   text NOT NULL,
    -- `owner` manages members; `approver` and `owner` decide by default; `viewer` reads; a team
    -- may name any other role and list it on its gates.
    role        text NOT NULL CHECK (role ~ '^[a-z][a-z0-9_]{0,49}$'),
    added_by    text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, user_name)
);
-- "Which groups is this user in" is the question every list and inbox asks.
CREATE INDEX idx_group_members_user ON group_members (user_name, group_id);

-- runs.group_id was a free text column nobody wrote (always NULL): it now names a group.
ALTER TABLE runs ALTER COLUMN group_id TYPE uuid USING group_id::uuid;
ALTER TABLE runs ADD CONSTRAINT runs_group_id_fkey FOREIGN KEY (group_id) REFERENCES groups (id);
CREATE INDEX idx_runs_group_created ON runs (group_id, created_at DESC, id DESC)
 WHERE group_id IS NOT NULL;
DROP INDEX idx_runs_group_id;

-- The group roles that may decide a request (besides the run's owner and the service role).
ALTER TABLE hitl_requests ADD COLUMN decider_roles text[] NOT NULL DEFAULT '{owner,approver}';

-- Inbox streams of group members are woken too: the payload names the run's group and who may
-- decide, so the API hands each change only to the inboxes it concerns.
CREATE OR REPLACE FUNCTION notify_gate_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('waystation_gates', json_build_object(
        'request_id', NEW.id, 'run_id', NEW.run_id, 'status', NEW.status,
        'owner', r.owner, 'group_id', r.group_id, 'decider_roles', NEW.decider_roles)::text)
       FROM runs r WHERE r.id = NEW.run_id;
    RETURN NULL;
END
$$;

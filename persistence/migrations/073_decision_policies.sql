-- Decision policies (issue 42): named, versioned rules that decide a gate, route it or leave
-- it to people. A policy is a group's (its deciders write it, its members read it) or a
-- person's own (it applies to the runs they own; nobody else sees it). Every change is a new
-- version; a gate records the version it was judged by, so a version is never changed.

CREATE TABLE decision_policies (
    id          uuid PRIMARY KEY,
    name        text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,79}$'),
    owner       text NOT NULL,
    group_id    uuid REFERENCES groups (id) ON DELETE CASCADE,
    -- The version in force; versions 1..version are kept.
    version     int NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz
);
-- One live policy of a name per scope (a group's, or a person's own).
CREATE UNIQUE INDEX decision_policies_one_name
    ON decision_policies (COALESCE(group_id::text, 'owner:' || owner), name)
    WHERE deleted_at IS NULL;

CREATE TABLE decision_policy_versions (
    policy_id        uuid NOT NULL REFERENCES decision_policies (id) ON DELETE CASCADE,
    version          int NOT NULL CHECK (version >= 1),
    kind             text NOT NULL,
    -- NULL: every gate of the kind.
    checkpoint_name  text,
    -- NULL: every project.
    project_id       text,
    condition        text NOT NULL,
    decision         jsonb NOT NULL,
    mode             text NOT NULL CHECK (mode IN ('decide', 'shadow')),
    created_by       text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (policy_id, version)
);
CREATE INDEX idx_decision_policy_versions_kind ON decision_policy_versions (kind, policy_id);

GRANT SELECT, INSERT, UPDATE, DELETE ON decision_policies, decision_policy_versions
   TO waystation_api, waystation_worker;
ALTER TABLE decision_policies ENABLE ROW LEVEL SECURITY;
ALTER TABLE decision_policies FORCE ROW LEVEL SECURITY;
ALTER TABLE decision_policy_versions ENABLE ROW LEVEL SECURITY;
ALTER TABLE decision_policy_versions FORCE ROW LEVEL SECURITY;
CREATE POLICY worker_all ON decision_policies TO waystation_worker USING (true) WITH CHECK (true);
CREATE POLICY worker_all ON decision_policy_versions TO waystation_worker
    USING (true) WITH CHECK (true);
CREATE POLICY api_visible ON decision_policies TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR (group_id IS NULL AND owner = waystation_user())
           OR group_id IN (SELECT waystation_user_groups()));
CREATE POLICY api_visible ON decision_policy_versions TO waystation_api
    USING (EXISTS (SELECT 1 FROM decision_policies p WHERE p.id = policy_id));

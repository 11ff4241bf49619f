-- What each applicable policy came to when a gate opened (written by the activity that
-- evaluates them, whose result is also in the run's history). Shadow policies' verdicts are
-- compared with the people's decision to report their agreement.

CREATE TABLE policy_evaluations (
    -- The gate's request (its row is written just after, by the same workflow).
    request_id    uuid NOT NULL,
    run_id        uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    policy_id     uuid NOT NULL REFERENCES decision_policies (id) ON DELETE CASCADE,
    version       int NOT NULL,
    name          text NOT NULL,
    mode          text NOT NULL CHECK (mode IN ('decide', 'shadow')),
    outcome       text NOT NULL
                  CHECK (outcome IN ('decide', 'route', 'quorum', 'people', 'none', 'error')),
    -- The option it decided, or would have decided in shadow mode.
    decision      text,
    error         text,
    evaluated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (request_id, policy_id)
);
CREATE INDEX idx_policy_evaluations_policy ON policy_evaluations (policy_id, evaluated_at DESC);
CREATE INDEX idx_policy_evaluations_run ON policy_evaluations (run_id);

GRANT SELECT, INSERT, UPDATE, DELETE ON policy_evaluations TO waystation_api, waystation_worker;
ALTER TABLE policy_evaluations ENABLE ROW LEVEL SECURITY;
ALTER TABLE policy_evaluations FORCE ROW LEVEL SECURITY;
CREATE POLICY worker_all ON policy_evaluations TO waystation_worker USING (true) WITH CHECK (true);
CREATE POLICY api_visible ON policy_evaluations TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR run_id IN (SELECT waystation_visible_runs()));

-- Row-level security (migration 022) on the tables of migration 023: a request's votes and
-- delegations are visible with the request, so with its run.

GRANT SELECT, INSERT, UPDATE, DELETE ON gate_votes, gate_delegations
   TO waystation_api, waystation_worker;

ALTER TABLE gate_votes ENABLE ROW LEVEL SECURITY;
ALTER TABLE gate_votes FORCE ROW LEVEL SECURITY;
ALTER TABLE gate_delegations ENABLE ROW LEVEL SECURITY;
ALTER TABLE gate_delegations FORCE ROW LEVEL SECURITY;

CREATE POLICY worker_all ON gate_votes TO waystation_worker USING (true) WITH CHECK (true);
CREATE POLICY worker_all ON gate_delegations TO waystation_worker USING (true) WITH CHECK (true);

CREATE POLICY api_visible ON gate_votes TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR EXISTS (SELECT 1 FROM hitl_requests g WHERE g.id = gate_votes.request_id));
CREATE POLICY api_visible ON gate_delegations TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR EXISTS (SELECT 1 FROM hitl_requests g WHERE g.id = gate_delegations.request_id));

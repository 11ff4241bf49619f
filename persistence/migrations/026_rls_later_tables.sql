-- Row-level security (migration 022) on the tables of later migrations: a request's votes and
-- delegations (023) are visible with the request, so with its run; the erasure ledger (025)
-- to the service role only.

GRANT SELECT, INSERT, UPDATE, DELETE ON gate_votes, gate_delegations, user_erasures
   TO waystation_api, waystation_worker;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['gate_votes', 'gate_delegations', 'user_erasures'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY worker_all ON %I TO waystation_worker '
                       'USING (true) WITH CHECK (true)', t);
    END LOOP;
END
$$;

CREATE POLICY api_visible ON gate_votes TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR EXISTS (SELECT 1 FROM hitl_requests g WHERE g.id = gate_votes.request_id));
CREATE POLICY api_visible ON gate_delegations TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR EXISTS (SELECT 1 FROM hitl_requests g WHERE g.id = gate_delegations.request_id));
CREATE POLICY api_visible ON user_erasures TO waystation_api
    USING (waystation_claims_role() = 'service');

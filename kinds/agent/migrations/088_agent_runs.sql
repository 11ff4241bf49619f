-- An agent run's own fields, the agent kind's (issue 40): the summary it re-primes from
-- (`context_summary`, seed 003, issue 12) and the ids its tools returned that its agent
-- declares as entities (`related_entity_ids`). They were columns of the core's `runs`
-- (migrations 011 and 055, before the kind owned its tables). This is the move: the rows they
-- held are copied here and the columns leave `runs`; a database that never had them copies
-- nothing.
CREATE TABLE agent_runs (
    run_id              uuid PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    context_summary     text,
    related_entity_ids  jsonb
);

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns
                WHERE table_schema = current_schema() AND table_name = 'runs'
                  AND column_name = 'context_summary') THEN
        INSERT INTO agent_runs (run_id, context_summary, related_entity_ids)
        SELECT id, context_summary, related_entity_ids FROM runs
         WHERE context_summary IS NOT NULL OR related_entity_ids IS NOT NULL;
        ALTER TABLE runs DROP COLUMN context_summary, DROP COLUMN related_entity_ids;
    END IF;
END
$$;

-- Written with the run's progress: the workflow's run state carries them as `kind_fields`
-- (kinds/agent/workflow.py), which the core's apply_progress_write hands to this function
-- in the same statement (migration 087). A field left out or null keeps the stored one, as
-- the columns did; applying the same write again changes nothing.
CREATE FUNCTION record_agent_run_fields(p_run_id uuid, p_fields jsonb)
RETURNS void LANGUAGE sql AS $$
INSERT INTO agent_runs (run_id, context_summary, related_entity_ids)
VALUES (p_run_id, p_fields->>'context_summary',
        NULLIF(p_fields->'related_entity_ids', 'null'::jsonb))
ON CONFLICT (run_id) DO UPDATE SET
    context_summary = COALESCE(EXCLUDED.context_summary, agent_runs.context_summary),
    related_entity_ids = COALESCE(EXCLUDED.related_entity_ids, agent_runs.related_entity_ids);
$$;
REVOKE ALL ON FUNCTION record_agent_run_fields(uuid, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION record_agent_run_fields(uuid, jsonb) TO waystation_worker;
INSERT INTO kind_run_writers (kind, writer)
VALUES ('agent', 'record_agent_run_fields(uuid, jsonb)');

-- Visible with its run, as the columns were with `runs`' row-level security; the workers
-- write it.
GRANT SELECT ON agent_runs TO waystation_api;
GRANT SELECT, INSERT, UPDATE, DELETE ON agent_runs TO waystation_worker;
ALTER TABLE agent_runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_runs FORCE ROW LEVEL SECURITY;
CREATE POLICY worker_all ON agent_runs TO waystation_worker USING (true) WITH CHECK (true);
CREATE POLICY api_visible ON agent_runs TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR agent_runs.run_id IN (SELECT waystation_visible_runs()));

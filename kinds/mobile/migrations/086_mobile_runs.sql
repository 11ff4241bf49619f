-- A mobile run's app package, the mobile kind's own (issue 40): it was a generated column of
-- the core's `runs` (migration 050, before the kind owned its tables), so `GET /runs?app_package=`
-- finds an app's runs through an index instead of reading every run's input. This is the move:
-- the rows the column held are copied here and the column leaves `runs`; a database that never
-- had it (migrated after the move) copies nothing.
CREATE TABLE mobile_runs (
    run_id       uuid PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    app_package  text NOT NULL
);
CREATE INDEX idx_mobile_runs_app_package ON mobile_runs (app_package, run_id);

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns
                WHERE table_schema = current_schema() AND table_name = 'runs'
                  AND column_name = 'app_package') THEN
        INSERT INTO mobile_runs (run_id, app_package)
        SELECT id, app_package FROM runs WHERE app_package IS NOT NULL;
        ALTER TABLE runs DROP COLUMN app_package;  -- its index goes with it
    END IF;
END
$$;

-- Every writer of a run (POST /runs, a fork, MCP's and A2A's starts) sets it without knowing
-- of it, from the input the run is started with, as the generated column did. SECURITY
-- DEFINER: the API inserts runs as its caller, whose row-level security would otherwise be
-- asked about a run it is writing in this statement; its owner, the migration runner, writes
-- every row (see migration 022).
CREATE FUNCTION record_mobile_run() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
BEGIN
    INSERT INTO public.mobile_runs (run_id, app_package)
    VALUES (NEW.id, NEW.input->>'app_package') ON CONFLICT (run_id) DO NOTHING;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION record_mobile_run() FROM PUBLIC;
CREATE TRIGGER runs_record_mobile_run AFTER INSERT ON runs
    FOR EACH ROW WHEN (NEW.kind = 'mobile_agent' AND NEW.input->>'app_package' IS NOT NULL)
    EXECUTE FUNCTION record_mobile_run();

-- Visible with its run, as the column was with `runs`' row-level security; only the trigger
-- writes it.
GRANT SELECT ON mobile_runs TO waystation_api;
GRANT SELECT, INSERT, UPDATE, DELETE ON mobile_runs TO waystation_worker;
ALTER TABLE mobile_runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE mobile_runs FORCE ROW LEVEL SECURITY;
CREATE POLICY worker_all ON mobile_runs TO waystation_worker USING (true) WITH CHECK (true);
CREATE POLICY api_visible ON mobile_runs TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR mobile_runs.run_id IN (SELECT waystation_visible_runs()));

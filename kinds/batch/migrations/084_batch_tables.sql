-- replaces: 004 052 061 062 063
-- The batch kind's tables (seeds 002, 004, issue 29), as the core's migrations 004, 010, 022,
-- 052 and 061-063 left them before the kind owned its tables (issue 40). A database those
-- core files already reached has all of this: `persistence.migrate` records this file as
-- applied there without running it (the `replaces` line above, see docs/run-kinds.md).
--
-- A job is a run's list of work units; each unit runs a pipeline of steps whose outputs are
-- kept per unit and step. Item payloads and results live here, never in workflow history.

CREATE TABLE jobs (
    -- One job per run, so a job's id is its run's id: clients get it from POST /runs.
    id               uuid PRIMARY KEY,
    run_id           uuid NOT NULL UNIQUE REFERENCES runs (id) ON DELETE CASCADE,
    name             text NOT NULL,
    status           text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'running', 'paused', 'completed', 'failed', 'canceled')),
    spec             jsonb NOT NULL,      -- steps, max_workers, max_retries, ... (no items)
    total_units      int NOT NULL DEFAULT 0,
    max_workers      int NOT NULL,
    test_unit_id     uuid,             -- run first when the job asked for a test unit
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    completed_at     timestamptz,
    -- What a job is for and the caller's own data about it, given at start (the API bounds
    -- their sizes); whether its test item passed (NULL until it finished, or when the job
    -- asked for none), written by the activity that finishes that item.
    description      text,
    test_passed      boolean,
    metadata         jsonb NOT NULL DEFAULT '{}'::jsonb
);

CREATE TABLE work_units (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    job_id             uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    ordinal            int NOT NULL,
    status             text NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'running', 'retrying', 'completed', 'failed')),
    payload            jsonb NOT NULL,
    result             jsonb,             -- the last step's output
    error              text,
    retry_count        int NOT NULL DEFAULT 0,
    path               text[] NOT NULL DEFAULT '{}',  -- the steps this item took, in order
    rendered_prompt    text,              -- the last prompt sent to an agent
    conversation       jsonb NOT NULL DEFAULT '[]'::jsonb,
    -- A failed attempt of a step is paid for too.
    cost_usd           numeric(18, 9) NOT NULL DEFAULT 0,
    input_tokens       bigint NOT NULL DEFAULT 0,
    output_tokens      bigint NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL DEFAULT now(),
    started_at         timestamptz,
    completed_at       timestamptz,
    execution_ms       int,
    -- Every flag of the item's outputs (each naming its step): an output check flags an
    -- answer as it is stored (seed 002's unfilled placeholders).
    flags              jsonb NOT NULL DEFAULT '[]'::jsonb,
    -- The Temporal identity of the worker that last started the item and when its slice
    -- began (rewritten when a retry runs it elsewhere), the files the agent reported
    -- creating, and the provider's id of the last answer.
    worker_id          text,
    assigned_at        timestamptz,
    output_files       jsonb NOT NULL DEFAULT '[]'::jsonb,
    session_id         text,
    UNIQUE (job_id, ordinal)
);
-- Status filters and counts by status; (job_id, ordinal) is the keyset cursor of item lists.
CREATE INDEX idx_work_units_job_status ON work_units (job_id, status, ordinal);
-- GET /workers counts items by worker and status (items no worker started stay out), and
-- finds the workers with items running, polling or not (a dead worker's items wait there).
CREATE INDEX idx_work_units_worker ON work_units (worker_id, status) WHERE worker_id IS NOT NULL;
CREATE INDEX idx_work_units_running_worker ON work_units (worker_id)
    WHERE status = 'running' AND worker_id IS NOT NULL;

-- One row per unit and step: the checkpoint a retried or resumed item reads its earlier
-- outputs from (seed 002's fix: query stored outputs, never trust memory).
CREATE TABLE item_outputs (
    unit_id          uuid NOT NULL REFERENCES work_units (id) ON DELETE CASCADE,
    step             text NOT NULL,
    step_index       int NOT NULL,
    output           jsonb NOT NULL,
    rendered_prompt  text NOT NULL,
    next_step        text,               -- where the branching rules sent the item
    cost_usd         numeric(18, 9) NOT NULL DEFAULT 0,
    input_tokens     bigint NOT NULL DEFAULT 0,
    output_tokens    bigint NOT NULL DEFAULT 0,
    duration_ms      int,
    -- How often this step's output was written: above 1 would mean a completed step ran again.
    executions       int NOT NULL DEFAULT 1,
    created_at       timestamptz NOT NULL DEFAULT now(),
    flags            jsonb NOT NULL DEFAULT '[]'::jsonb,  -- the output check's
    PRIMARY KEY (unit_id, step)
);

-- A job's status follows its run's, so the workflow writes one row, not two.
CREATE FUNCTION follow_run_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE jobs SET status = NEW.status,
                    started_at = COALESCE(started_at, NEW.started_at),
                    completed_at = NEW.completed_at
     WHERE run_id = NEW.id AND status IS DISTINCT FROM NEW.status;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_follow_run_status AFTER UPDATE OF status ON runs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION follow_run_status();

-- Row-level security as the core's tables have it (migration 022): the worker sees and
-- writes everything; the API sees a job's rows with its run.
GRANT SELECT, INSERT, UPDATE, DELETE ON jobs, work_units, item_outputs
   TO waystation_api, waystation_worker;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['jobs', 'work_units', 'item_outputs'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY worker_all ON %I TO waystation_worker '
                       'USING (true) WITH CHECK (true)', t);
    END LOOP;
END
$$;
CREATE POLICY api_visible ON jobs TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR jobs.run_id IN (SELECT waystation_visible_runs()));
CREATE POLICY api_visible ON work_units TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR EXISTS (SELECT 1 FROM jobs j WHERE j.id = work_units.job_id));
CREATE POLICY api_visible ON item_outputs TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR EXISTS (SELECT 1 FROM work_units u WHERE u.id = item_outputs.unit_id));

-- GET /workers: per worker, its items running, completed and failed for good, and the
-- execution time of those it completed, for workers $1 (the pollers Temporal lists) and every
-- worker with an item running (a dead worker's items wait there until retried elsewhere). An
-- item counts for the worker that last started it.
--
-- A worker's totals are its own, whoever's items it ran: any signed-in user sees how busy a
-- worker is. SECURITY DEFINER so they are counted over every item, not only those the caller's
-- row-level security shows; it returns counts only, never an item, a job or a run. Its owner,
-- the migration runner, reads every row (see migration 022).
CREATE FUNCTION worker_unit_totals(worker_ids text[])
RETURNS TABLE (worker_id text, running bigint, completed bigint, failed bigint,
               execution_ms bigint, last_assigned_at timestamptz)
LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
SELECT u.worker_id,
       count(*) FILTER (WHERE u.status = 'running'),
       count(*) FILTER (WHERE u.status = 'completed'),
       count(*) FILTER (WHERE u.status = 'failed'),
       COALESCE(sum(u.execution_ms) FILTER (WHERE u.status = 'completed'), 0)::bigint,
       max(u.assigned_at)
  FROM public.work_units u
 WHERE u.worker_id = ANY(worker_ids || ARRAY(
           SELECT DISTINCT r.worker_id FROM public.work_units r
            WHERE r.status = 'running' AND r.worker_id IS NOT NULL))
 GROUP BY u.worker_id
$$;
REVOKE ALL ON FUNCTION worker_unit_totals(text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION worker_unit_totals(text[]) TO waystation_api;

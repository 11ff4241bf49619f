-- Batch jobs (seed 004) and multi-step item pipelines (seed 002): a job is a run's list of
-- work units; each unit runs a pipeline of steps whose outputs are kept per unit and step.
-- Item payloads and results live here, never in workflow history.

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
    completed_at     timestamptz
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
    cost_usd           numeric(14, 6) NOT NULL DEFAULT 0,
    input_tokens       bigint NOT NULL DEFAULT 0,
    output_tokens      bigint NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL DEFAULT now(),
    started_at         timestamptz,
    completed_at       timestamptz,
    execution_ms       int,
    UNIQUE (job_id, ordinal)
);
-- Status filters and counts by status; (job_id, ordinal) is the keyset cursor of item lists.
CREATE INDEX idx_work_units_job_status ON work_units (job_id, status, ordinal);

-- One row per unit and step: the checkpoint a retried or resumed item reads its earlier
-- outputs from (seed 002's fix: query stored outputs, never trust memory).
CREATE TABLE item_outputs (
    unit_id          uuid NOT NULL REFERENCES work_units (id) ON DELETE CASCADE,
    step             text NOT NULL,
    step_index       int NOT NULL,
    output           jsonb NOT NULL,
    rendered_prompt  text NOT NULL,
    next_step        text,               -- where the branching rules sent the item
    cost_usd         numeric(14, 6) NOT NULL DEFAULT 0,
    input_tokens     bigint NOT NULL DEFAULT 0,
    output_tokens    bigint NOT NULL DEFAULT 0,
    duration_ms      int,
    -- How often this step's output was written: above 1 would mean a completed step ran again.
    executions       int NOT NULL DEFAULT 1,
    created_at       timestamptz NOT NULL DEFAULT now(),
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

-- Issue 29, seed 004's workers view: which worker process ran an item, and what the model
-- left besides its answer. `worker_id` is the Temporal identity of the worker that last
-- started the item (the one `describe_task_queue` lists as a poller), and `assigned_at` when
-- that worker's slice (or single-item activity) began: both are rewritten when a retry runs
-- the item on another worker, and kept once the item has finished. `output_files` lists the
-- files the agent reported creating, every step's; `session_id` is the provider's id of the
-- last answer (a completion id, a coding agent's session) to look the call up by.
-- The columns are `work_units`', so its row-level security covers them.
ALTER TABLE work_units
    ADD COLUMN worker_id    text,
    ADD COLUMN assigned_at  timestamptz,
    ADD COLUMN output_files jsonb NOT NULL DEFAULT '[]'::jsonb,
    ADD COLUMN session_id   text;

-- GET /workers counts items by worker and status (items no worker started stay out), and
-- finds the workers with items running, polling or not (a dead worker's items wait there).
CREATE INDEX idx_work_units_worker ON work_units (worker_id, status) WHERE worker_id IS NOT NULL;
CREATE INDEX idx_work_units_running_worker ON work_units (worker_id)
    WHERE status = 'running' AND worker_id IS NOT NULL;

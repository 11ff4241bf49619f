-- Every run, whatever its kind, says why it stopped and when (seed 001's runs.stop_reason and
-- finished_at), and belongs to an optional project (seed 000's project_id), which lists filter by.

ALTER TABLE runs ADD COLUMN stop_reason text;
-- The same instant as completed_at, under the seed's name: derived, so the two never disagree.
ALTER TABLE runs ADD COLUMN finished_at timestamptz GENERATED ALWAYS AS (completed_at) STORED;
ALTER TABLE runs ADD COLUMN project_id text;

UPDATE runs SET project_id = input->>'project_id' WHERE input->>'project_id' IS NOT NULL;
UPDATE runs SET stop_reason = CASE status WHEN 'completed' THEN 'completed'
                                          WHEN 'canceled' THEN 'canceled'
                                          ELSE 'failed' END
 WHERE status IN ('completed', 'failed', 'canceled');

CREATE INDEX idx_runs_project ON runs (project_id, created_at DESC, id DESC)
 WHERE project_id IS NOT NULL;

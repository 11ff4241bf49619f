-- Retention and erasure (issue 15): finished runs are found by age, erased runs are hidden at
-- once (erased_at) and deleted by the retention sweep after a grace period.
ALTER TABLE runs ADD COLUMN erased_at timestamptz;
CREATE INDEX idx_runs_finished_at ON runs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX idx_runs_erased_at ON runs (erased_at) WHERE erased_at IS NOT NULL;

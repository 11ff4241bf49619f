-- Seed 001: a mobile run's app package as a column of its own, so `GET /runs?app_package=`
-- finds an app's runs through an index instead of reading every run's input. Generated from
-- the input the run was started with: every writer sets it without knowing of it, and the
-- runs already there get theirs now (adding a stored generated column rewrites `runs` once).
-- Other kinds have none. The column is `runs`', so `runs`' row-level security covers it.
ALTER TABLE runs ADD COLUMN app_package text
    GENERATED ALWAYS AS (CASE WHEN kind = 'mobile_agent' THEN input->>'app_package' END) STORED;
CREATE INDEX idx_runs_app_package ON runs (app_package, created_at DESC, id DESC)
    WHERE app_package IS NOT NULL;

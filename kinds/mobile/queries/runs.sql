-- name: runs_of_app
-- The runs list's `app_package` filter (RunKind.run_filters): the ids of the mobile runs of
-- app $1, through mobile_runs' index; the caller's row-level security applies.
SELECT run_id FROM mobile_runs WHERE app_package = $1

-- name: run_app_package
-- A mobile run's app, for its view (`GET /runs/{id}`).
SELECT app_package FROM mobile_runs WHERE run_id = $1;

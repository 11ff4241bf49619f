-- name: worker_unit_totals
-- Items running, completed and failed, and execution time, per worker of $1 and per worker
-- with an item running (migration 063: counts over every item, whoever's).
SELECT * FROM worker_unit_totals($1::text[]);

-- name: worker_running_units
-- The items running now on workers $1 that the caller may see (row-level security), with
-- their job's run (whose readers may see them).
SELECT w.worker_id, w.id AS unit_id, w.job_id, j.run_id, w.ordinal, w.assigned_at,
       w.started_at
  FROM work_units w JOIN jobs j ON j.id = w.job_id
 WHERE w.worker_id = ANY($1::text[]) AND w.status = 'running'
 ORDER BY w.worker_id, w.assigned_at, w.ordinal;

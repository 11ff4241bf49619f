-- Issue 29, seed 004's workers view (GET /workers): per worker, its items running, completed
-- and failed for good, and the execution time of those it completed, for workers $1 (the
-- pollers Temporal lists) and every worker with an item running (a dead worker's items wait
-- there until retried elsewhere). An item counts for the worker that last started it.
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

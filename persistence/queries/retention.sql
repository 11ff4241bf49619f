-- name: runs_to_purge
-- A batch of runs due for deletion: finished before $1 (NULL: none by age), or erased
-- before $2 (NULL: none by erasure); oldest first.
SELECT id, workflow_id FROM runs
 WHERE ($1::timestamptz IS NOT NULL AND finished_at < $1)
    OR ($2::timestamptz IS NOT NULL AND erased_at < $2)
 ORDER BY coalesce(finished_at, erased_at)
 LIMIT $3;

-- name: archive_runs
-- One JSON document per run: the run and every row of the core's that belongs to it (each
-- kind adds its own tables' rows: `DataHooks.retention`).
SELECT jsonb_build_object(
    'run', to_jsonb(r),
    'events', (SELECT coalesce(jsonb_agg(to_jsonb(e) ORDER BY e.seq), '[]')
                 FROM run_events e WHERE e.run_id = r.id),
    'snapshots', (SELECT coalesce(jsonb_agg(to_jsonb(s) ORDER BY s.step_ordinal), '[]')
                    FROM run_snapshots s WHERE s.run_id = r.id),
    'decisions', (SELECT coalesce(jsonb_agg(to_jsonb(h) ORDER BY h.created_at), '[]')
                    FROM hitl_requests h WHERE h.run_id = r.id),
    'artifacts', (SELECT coalesce(jsonb_agg(to_jsonb(a) ORDER BY a.step), '[]')
                    FROM run_artifacts a WHERE a.run_id = r.id),
    'webhook_deliveries', (SELECT coalesce(jsonb_agg(to_jsonb(d) || jsonb_build_object(
                               'attempts', (SELECT coalesce(jsonb_agg(to_jsonb(t)), '[]')
                                              FROM webhook_attempts t
                                             WHERE t.delivery_id = d.id))), '[]')
                             FROM webhook_deliveries d WHERE d.run_id = r.id))::text AS document
  FROM runs r
 WHERE r.id = ANY($1::uuid[])
 ORDER BY r.id;

-- name: delete_run_events_chunk
-- At most $2 events of the given runs; run in a loop so no transaction holds many row locks.
-- A row is named by its partition and place in it: run_events is partitioned (migration 021)
-- and has no index on id alone, while (tableoid, ctid) finds each row directly.
DELETE FROM run_events
 WHERE (tableoid, ctid) IN (SELECT tableoid, ctid FROM run_events
                             WHERE run_id = ANY($1::uuid[]) LIMIT $2);

-- name: artifacts_of_runs
-- The artifacts the given runs saw.
SELECT DISTINCT sha256 FROM run_artifacts WHERE run_id = ANY($1::uuid[]);

-- name: delete_runs
-- The runs themselves; their snapshots, decisions (and decision links), kinds' rows,
-- graph outcomes, artifact rows and webhook deliveries (and attempts) go by ON DELETE CASCADE.
DELETE FROM runs WHERE id = ANY($1::uuid[]);

-- name: orphaned_artifacts
-- Of the given artifacts, those no remaining run saw; their files can go.
SELECT sha FROM unnest($1::text[]) AS sha
 WHERE NOT EXISTS (SELECT 1 FROM run_artifacts a WHERE a.sha256 = sha);

-- name: open_user_runs
-- The workflow ids of a user's visible runs that have not finished.
SELECT workflow_id FROM runs
 WHERE owner = $1 AND erased_at IS NULL
   AND status NOT IN ('completed', 'failed', 'canceled');

-- name: erase_user_runs
-- Hides every run of a user at once (a soft delete); returns how many were hidden now. Runs
-- they hid themselves stay hidden since then but can no longer be restored (migration 051).
WITH erased AS (
    UPDATE runs r SET erased_at = COALESCE(r.erased_at, now()), hidden_by = NULL
      FROM (SELECT id, erased_at IS NULL AS was_visible FROM runs
             WHERE owner = $1 AND (erased_at IS NULL OR hidden_by IS NOT NULL) FOR UPDATE) o
     WHERE r.id = o.id
    RETURNING o.was_visible
)
SELECT count(*) FILTER (WHERE was_visible) FROM erased;

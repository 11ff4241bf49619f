-- name: latest_snapshot
-- The newest snapshot of a run.
SELECT * FROM run_snapshots WHERE run_id = $1 ORDER BY step_ordinal DESC LIMIT 1;

-- name: list_snapshots
-- All snapshots of a run, oldest first.
SELECT * FROM run_snapshots WHERE run_id = $1 ORDER BY step_ordinal;

-- name: list_snapshot_heads
-- Every snapshot of a run without its state, oldest first (the history a person picks from).
SELECT run_id, step_ordinal, label, phase, created_at FROM run_snapshots
 WHERE run_id = $1 ORDER BY step_ordinal;

-- name: get_snapshot
-- One snapshot of a run by its ordinal.
SELECT * FROM run_snapshots WHERE run_id = $1 AND step_ordinal = $2;

-- name: latest_snapshot_at_gate
-- The newest snapshot a run took while it waited on checkpoint $2 (a fork's `from.checkpoint`).
SELECT * FROM run_snapshots WHERE run_id = $1 AND state->>'waiting_on' = $2
 ORDER BY step_ordinal DESC LIMIT 1;

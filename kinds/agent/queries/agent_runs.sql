-- name: agent_run_fields
-- An agent run's summary and related entities (its view, its transcript's summary); no row:
-- none written yet. The caller's row-level security applies.
SELECT context_summary, related_entity_ids FROM agent_runs WHERE run_id = $1;

-- name: archive_agent_runs
-- The summary and related entities of each of the given runs, for the retention sweep's
-- archive (they were fields of its `run` before the kind owned its table).
SELECT run_id, to_jsonb(a)::text AS fields FROM agent_runs a WHERE run_id = ANY($1::uuid[]);

-- Seed 003 (issue 29), on the runs row:
--
-- A run may be named within its group ("venue booking"): starting a run of the same kind and
-- name for the group while one is in progress returns that one (the seed's "find the
-- in-progress workflow before creating one"). The partial unique index is what makes two
-- racing starts create one run: the second insert conflicts and reads the first. An erased
-- run is gone for every read, so it does not hold its name either.
--
-- `related_entity_ids` keeps the ids an agent run's tools returned that its agent declares as
-- entities ({"vendor_ids": [...]}: the planner's shortlisted and booked vendors), written with
-- the run's progress like `context_summary` (NULL in a write leaves them as they are).

ALTER TABLE runs ADD COLUMN name text;
ALTER TABLE runs ADD COLUMN related_entity_ids jsonb;
CREATE UNIQUE INDEX runs_one_in_progress_per_name ON runs (group_id, kind, name)
 WHERE name IS NOT NULL AND erased_at IS NULL
   AND status NOT IN ('completed', 'failed', 'canceled');

-- update_run_progress (migration 028) with the entities; the old signature goes, so there is
-- one function that writes a run's progress.
DROP FUNCTION update_run_progress(uuid, text, int, text, text, jsonb, text, text, text);
CREATE FUNCTION update_run_progress(
    p_id uuid, p_status text, p_phase int, p_phase_name text, p_hitl text, p_result jsonb,
    p_error text, p_stop text, p_summary text, p_entities jsonb) RETURNS void LANGUAGE sql AS $$
UPDATE runs SET
    status = p_status,
    current_phase = p_phase,
    phase_name = p_phase_name,
    hitl_state = p_hitl,
    hitl_checkpoint_at = CASE WHEN p_hitl IS NULL THEN NULL
                              WHEN hitl_state IS DISTINCT FROM p_hitl THEN now()
                              ELSE hitl_checkpoint_at END,
    result = COALESCE(p_result, result),
    error_message = COALESCE(p_error, error_message),
    stop_reason = COALESCE(p_stop, stop_reason),
    context_summary = COALESCE(p_summary, context_summary),
    related_entity_ids = COALESCE(p_entities, related_entity_ids),
    started_at = COALESCE(started_at, CASE WHEN p_status <> 'pending' THEN now() END),
    completed_at = CASE WHEN p_status IN ('completed', 'failed', 'canceled')
                        THEN COALESCE(completed_at, now()) ELSE completed_at END,
    updated_at = now()
 WHERE id = p_id AND status NOT IN ('completed', 'failed', 'canceled');
UPDATE hitl_requests SET status = 'superseded', updated_at = now()
 WHERE run_id = p_id AND status = 'pending' AND p_status IN ('completed', 'failed', 'canceled');
$$;

-- apply_progress_write (migration 028) passing the run write's `related_entity_ids`.
CREATE OR REPLACE FUNCTION apply_progress_write(p_run_id uuid, w jsonb)
RETURNS TABLE (out_key text, out_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    r jsonb := NULLIF(w->'run', 'null'::jsonb);
BEGIN
    IF r->>'status' IN ('completed', 'failed', 'canceled') AND EXISTS (
            SELECT 1 FROM runs WHERE id = p_run_id
                                 AND status IN ('completed', 'failed', 'canceled')) THEN
        RETURN;
    END IF;
    IF r IS NOT NULL THEN
        PERFORM update_run_progress(
            p_run_id, r->>'status', (r->>'current_phase')::int, r->>'phase_name',
            r->>'hitl_state', NULLIF(r->'result', 'null'::jsonb), r->>'error_message',
            r->>'stop_reason', r->>'context_summary',
            NULLIF(r->'related_entity_ids', 'null'::jsonb));
    END IF;
    IF jsonb_array_length(w->'snapshots') > 0 THEN
        INSERT INTO run_snapshots (run_id, step_ordinal, label, phase, state)
        SELECT p_run_id, sn.step_ordinal, sn.label, sn.phase, sn.state
          FROM jsonb_to_recordset(w->'snapshots')
               AS sn (step_ordinal int, label text, phase int, state jsonb)
        ON CONFLICT (run_id, step_ordinal) DO NOTHING;
    END IF;
    IF jsonb_array_length(w->'events') > 0 THEN
        RETURN QUERY SELECT a.out_key, a.out_seq FROM append_run_events(p_run_id, w->'events') a;
    END IF;
END
$$;

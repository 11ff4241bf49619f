-- A run's progress write (its visible state, snapshots and events: what nearly every recorder
-- write and every crew task's first write hold; persistence.writes apply_write) as one
-- function, so it costs one round trip and one statement's implicit transaction instead of
-- BEGIN, three statements and COMMIT (issue 16). Each part stays idempotent as before: the
-- run row never leaves a terminal status, snapshots by ordinal, events by key.
--
-- w: {run: {status, current_phase, phase_name, hitl_state, result, error_message,
--     stop_reason, context_summary} | null, snapshots: [{step_ordinal, label, phase, state}],
--     events: [EventWrite, ...]}. Returns each event key's seq.
CREATE FUNCTION apply_progress_write(p_run_id uuid, w jsonb)
RETURNS TABLE (out_key text, out_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    r jsonb := NULLIF(w->'run', 'null'::jsonb);
BEGIN
    IF r IS NOT NULL THEN
        PERFORM update_run_progress(
            p_run_id, r->>'status', (r->>'current_phase')::int, r->>'phase_name',
            r->>'hitl_state', NULLIF(r->'result', 'null'::jsonb), r->>'error_message',
            r->>'stop_reason', r->>'context_summary');
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

-- The workers' write path only.
REVOKE ALL ON FUNCTION apply_progress_write(uuid, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION apply_progress_write(uuid, jsonb) TO waystation_worker;

-- A run's progress write (its visible state, snapshots and events: what nearly every recorder
-- write, every crew task's first write and every mobile step hold) as one function, so it
-- costs one round trip and one statement's implicit transaction instead of BEGIN, three
-- statements and COMMIT (issue 16; persistence.writes apply_write). Each part stays
-- idempotent: the run row never leaves a terminal status, snapshots by ordinal, events by key.
-- (Edited when the kinds came to own their tables, issue 40: the mobile step's function,
-- rewritten here then over apply_progress_write, is the mobile kind's own migration.)
--
-- A run also ends once. A cancel that reaches a workflow while its last local activities run
-- (their writes committed) makes Temporal refuse the worker's completion; the local
-- activities' results are lost with it, the workflow replays, meets the cancel first and
-- wrote `run.canceled` after the `run.completed` already there; a gate opened on the refused
-- path stayed pending on a run that had ended. So a write that ends a run does nothing to a
-- run that has already ended (a retried end is already there; another end is the refused
-- path's), and a run that ends supersedes whatever request of it is still pending.

CREATE OR REPLACE FUNCTION update_run_progress(
    p_id uuid, p_status text, p_phase int, p_phase_name text, p_hitl text, p_result jsonb,
    p_error text, p_stop text, p_summary text) RETURNS void LANGUAGE sql AS $$
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
    started_at = COALESCE(started_at, CASE WHEN p_status <> 'pending' THEN now() END),
    completed_at = CASE WHEN p_status IN ('completed', 'failed', 'canceled')
                        THEN COALESCE(completed_at, now()) ELSE completed_at END,
    updated_at = now()
 WHERE id = p_id AND status NOT IN ('completed', 'failed', 'canceled');
UPDATE hitl_requests SET status = 'superseded', updated_at = now()
 WHERE run_id = p_id AND status = 'pending' AND p_status IN ('completed', 'failed', 'canceled');
$$;

-- w: {run: {status, current_phase, phase_name, hitl_state, result, error_message,
--     stop_reason, context_summary} | null, snapshots: [{step_ordinal, label, phase, state}],
--     events: [EventWrite, ...]}. Returns each event key's seq.
CREATE FUNCTION apply_progress_write(p_run_id uuid, w jsonb)
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

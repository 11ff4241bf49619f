-- A kind's own fields of its run travel with the core's progress write and land in the kind's
-- own table, in the same statement (issue 40: no core table carries a kind's column).
--
-- A workflow's run state (RunStateWrite) may carry `kind_fields`, a JSON object the core does
-- not read: apply_progress_write hands it to the SQL function the run's kind registered here
-- (`kind_run_writers`, a row its own migration inserts), before the run's row moves, so the
-- kind's write commits or rolls back with the run's and stops with it at a terminal status,
-- as a column of `runs` did. A writer is `(p_run_id uuid, p_fields jsonb) RETURNS void` and
-- must be idempotent (an upsert: a retried write applies again). A run whose kind registered
-- none refuses the write: its fields would be lost.
--
-- The core's functions as they were (migration 055), without the fields of a kind's that
-- `runs` carried: the kind's migration that moves them drops the columns after this one.

CREATE TABLE kind_run_writers (
    kind    text PRIMARY KEY,
    writer  regprocedure NOT NULL
);
-- Read by the workers' write path; written by migrations only (the worker role is granted no
-- more than SELECT; the policy lets the owner that migrates, a member of that role, insert a
-- kind's row under forced row-level security).
GRANT SELECT ON kind_run_writers TO waystation_worker;
ALTER TABLE kind_run_writers ENABLE ROW LEVEL SECURITY;
ALTER TABLE kind_run_writers FORCE ROW LEVEL SECURITY;
CREATE POLICY worker_all ON kind_run_writers TO waystation_worker USING (true) WITH CHECK (true);

CREATE FUNCTION apply_kind_run_fields(p_run_id uuid, p_fields jsonb)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_kind   text;
    v_writer regprocedure;
BEGIN
    SELECT r.kind, w.writer INTO v_kind, v_writer
      FROM runs r LEFT JOIN kind_run_writers w ON w.kind = r.kind
     WHERE r.id = p_run_id AND r.status NOT IN ('completed', 'failed', 'canceled');
    IF NOT FOUND THEN
        RETURN;  -- a finished run's fields stay as they were, as its row does
    END IF;
    IF v_writer IS NULL THEN
        RAISE EXCEPTION 'run % of kind % writes kind_fields, and its kind registered no writer '
                        'of them (kind_run_writers)', p_run_id, v_kind
              USING ERRCODE = 'undefined_function';
    END IF;
    EXECUTE format('SELECT %s($1, $2)', v_writer::regproc) USING p_run_id, p_fields;
END
$$;
REVOKE ALL ON FUNCTION apply_kind_run_fields(uuid, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION apply_kind_run_fields(uuid, jsonb) TO waystation_worker;

DROP FUNCTION update_run_progress(uuid, text, int, text, text, jsonb, text, text, text, jsonb);
CREATE FUNCTION update_run_progress(
    p_id uuid, p_status text, p_phase int, p_phase_name text, p_hitl text, p_result jsonb,
    p_error text, p_stop text) RETURNS void LANGUAGE sql AS $$
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
    started_at = COALESCE(started_at, CASE WHEN p_status <> 'pending' THEN now() END),
    completed_at = CASE WHEN p_status IN ('completed', 'failed', 'canceled')
                        THEN COALESCE(completed_at, now()) ELSE completed_at END,
    updated_at = now()
 WHERE id = p_id AND status NOT IN ('completed', 'failed', 'canceled');
UPDATE hitl_requests SET status = 'superseded', updated_at = now()
 WHERE run_id = p_id AND status = 'pending' AND p_status IN ('completed', 'failed', 'canceled');
$$;

-- w: {run: {status, current_phase, phase_name, hitl_state, result, error_message,
--     stop_reason, kind_fields} | null, snapshots: [...], events: [...]} (migration 028).
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
        -- The kind's fields first: the write that ends the run still carries its last ones.
        IF NULLIF(r->'kind_fields', 'null'::jsonb) IS NOT NULL THEN
            PERFORM apply_kind_run_fields(p_run_id, r->'kind_fields');
        END IF;
        PERFORM update_run_progress(
            p_run_id, r->>'status', (r->>'current_phase')::int, r->>'phase_name',
            r->>'hitl_state', NULLIF(r->'result', 'null'::jsonb), r->>'error_message',
            r->>'stop_reason');
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

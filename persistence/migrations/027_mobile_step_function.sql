-- The run's progress in one statement (issue 16), for the recorder's writes and the
-- mobile kind's one-call step (its own migration), and append_run_events planned afresh.
-- Edited when the kinds came to own their tables (issue 40): the mobile step's function
-- this file created then is the mobile kind's own migration.

-- A run's visible state moves through this one statement, from a recorder write
-- (persistence/queries/runs.sql) or a mobile step's one call; a finished run never
-- moves back (a late retried write is a no-op).
CREATE FUNCTION update_run_progress(
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
$$;

-- append_run_events, with its key look-up planned afresh once per call. The look-up it had
-- (one statement per event) kept PL/pgSQL's cached generic plan, made on a session's early
-- calls while the month's partition was nearly empty: there an index scan on (run_id, seq),
-- filtering on the key, costs the same as one on (run_id, event_key), and once chosen it
-- reads every earlier event of the run for each new one (measured: 1.3 ms a call of five
-- events at first, 5.5 ms after 2,000 calls of one run; a mobile run's steps slowed
-- as they went). EXECUTE plans with the partition's size of the moment, and one look-up for
-- all keys is one plan a call.
CREATE OR REPLACE FUNCTION append_run_events(p_run_id uuid, p_events jsonb)
RETURNS TABLE (out_key text, out_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_last    bigint;
    v_seq     bigint;
    v_first   bigint;
    v_at      timestamptz;
    v_known   jsonb;
    v_rows    jsonb := '[]'::jsonb;
    v_payload text;
    e         jsonb;
BEGIN
    SELECT r.last_seq INTO v_last FROM runs r WHERE r.id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % does not exist', p_run_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    EXECUTE 'SELECT COALESCE(jsonb_object_agg(event_key, seq), ''{}''::jsonb) FROM run_events
              WHERE run_id = $1 AND event_key = ANY ($2)'
       INTO v_known
      USING p_run_id, ARRAY(SELECT x->>'event_key' FROM jsonb_array_elements(p_events) x);
    FOR e IN SELECT value FROM jsonb_array_elements(p_events) LOOP
        v_seq := (v_known->>(e->>'event_key'))::bigint;
        IF v_seq IS NULL THEN
            v_last := v_last + 1;
            v_seq := v_last;
            v_first := coalesce(v_first, v_seq);
            INSERT INTO run_events (run_id, seq, event_key, type, phase, crew, task, agent, status,
                                    progress_pct, output, error_message, duration_ms)
            VALUES (p_run_id, v_seq, e->>'event_key', e->>'type', (e->>'phase')::int, e->>'crew',
                    e->>'task', e->>'agent', e->>'status', (e->>'progress_pct')::int,
                    NULLIF(e->'output', 'null'::jsonb), e->>'error_message',
                    (e->>'duration_ms')::int)
            RETURNING created_at INTO v_at;
            -- A key twice in one call is one event, as before.
            v_known := v_known || jsonb_build_object(e->>'event_key', v_seq);
            v_rows := v_rows || jsonb_build_array(
                (e - 'event_key') || jsonb_build_object('seq', v_seq, 'created_at', v_at));
        END IF;
        out_key := e->>'event_key';
        out_seq := v_seq;
        RETURN NEXT;
    END LOOP;
    IF v_first IS NOT NULL THEN
        UPDATE runs SET last_seq = v_last, updated_at = now() WHERE id = p_run_id;
        v_payload := json_build_object('run_id', p_run_id, 'first', v_first, 'seq', v_last,
                                       'events', v_rows)::text;
        IF octet_length(v_payload) > 7900 THEN
            v_payload := json_build_object('run_id', p_run_id, 'first', v_first,
                                           'seq', v_last)::text;
        END IF;
        PERFORM pg_notify('waystation_events', v_payload);
    END IF;
END
$$;

-- The event notification carries the new rows themselves when they fit.
--
-- Why: a live stream then hands an event to its clients straight from the notification,
-- without reading it back from `run_events` (one query less between commit and browser).
-- NOTIFY payloads are limited to 8000 bytes, so a batch whose rows do not fit announces only
-- `run_id`, `first` and `seq` (the last seq), and listeners read the rows as before. The
-- table stays the source of truth: a listener that misses a notification catches up from it.
CREATE OR REPLACE FUNCTION append_run_events(p_run_id uuid, p_events jsonb)
RETURNS TABLE (out_key text, out_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_last    bigint;
    v_seq     bigint;
    v_first   bigint;
    v_at      timestamptz;
    v_rows    jsonb := '[]'::jsonb;
    v_payload text;
    e         jsonb;
BEGIN
    SELECT r.last_seq INTO v_last FROM runs r WHERE r.id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % does not exist', p_run_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    FOR e IN SELECT value FROM jsonb_array_elements(p_events) LOOP
        SELECT re.seq INTO v_seq FROM run_events re
         WHERE re.run_id = p_run_id AND re.event_key = e->>'event_key';
        IF NOT FOUND THEN
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

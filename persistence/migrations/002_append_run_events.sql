-- Appends a batch of events to one run in a single round trip.
--
-- Why a function: the per-run counter row is locked (FOR UPDATE), so concurrent writers to one
-- run (the workflow's recorder and a progress-reporting activity) are serialised and `seq`
-- stays gapless; an event whose key is already stored keeps its first seq, so a retried
-- activity or a replayed workflow never writes twice. One NOTIFY per batch wakes listeners
-- only after commit (NOTIFY is transactional).
CREATE FUNCTION append_run_events(p_run_id uuid, p_events jsonb)
RETURNS TABLE (out_key text, out_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_last bigint;
    v_seq  bigint;
    v_new  int := 0;
    e      jsonb;
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
            v_new := v_new + 1;
            INSERT INTO run_events (run_id, seq, event_key, type, phase, crew, task, agent, status,
                                    progress_pct, output, error_message, duration_ms)
            VALUES (p_run_id, v_seq, e->>'event_key', e->>'type', (e->>'phase')::int, e->>'crew',
                    e->>'task', e->>'agent', e->>'status', (e->>'progress_pct')::int,
                    NULLIF(e->'output', 'null'::jsonb), e->>'error_message',
                    (e->>'duration_ms')::int);
        END IF;
        out_key := e->>'event_key';
        out_seq := v_seq;
        RETURN NEXT;
    END LOOP;
    IF v_new > 0 THEN
        UPDATE runs SET last_seq = v_last, updated_at = now() WHERE id = p_run_id;
        PERFORM pg_notify('waystation_events',
                          json_build_object('run_id', p_run_id, 'seq', v_last)::text);
    END IF;
END
$$;

-- append_run_events (migration 027's), with a call's new events inserted by one statement
-- instead of one INSERT per event (issue 16). Each INSERT into the partitioned table set up
-- tuple routing, its partition's indexes and its triggers again, and the notification's rows
-- were rebuilt by appending to a jsonb array per event: measured on a mobile step (five events
-- a call), the events' part of record_mobile_step. What a call does is unchanged: the run's row
-- locked, the keys looked up under that lock (planned afresh each call, see 027), a key's first
-- occurrence in the call inserted with the next seq in the order given, a key already stored
-- or met earlier in the call left as it is, one row returned per event given, in that order,
-- and one notification carrying the new events (or only their seqs when too long).
CREATE OR REPLACE FUNCTION append_run_events(p_run_id uuid, p_events jsonb)
RETURNS TABLE (out_key text, out_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_last    bigint;
    v_known   jsonb;
    v_added   jsonb;
    v_rows    jsonb;
    v_first   bigint;
    v_through bigint;
    v_payload text;
BEGIN
    SELECT r.last_seq INTO v_last FROM runs r WHERE r.id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % does not exist', p_run_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    EXECUTE 'SELECT COALESCE(jsonb_object_agg(event_key, seq), ''{}''::jsonb) FROM run_events
              WHERE run_id = $1 AND event_key = ANY ($2)'
       INTO v_known
      USING p_run_id, ARRAY(SELECT x->>'event_key' FROM jsonb_array_elements(p_events) x);
    WITH given AS (
        SELECT g.e, g.n FROM jsonb_array_elements(p_events) WITH ORDINALITY AS g (e, n)
    ), fresh AS (
        SELECT f.e, v_last + row_number() OVER (ORDER BY f.n) AS seq
          FROM (SELECT DISTINCT ON (e->>'event_key') e, n FROM given
                 WHERE NOT v_known ? (e->>'event_key')
                 ORDER BY e->>'event_key', n) f
    ), stored AS (
        INSERT INTO run_events (run_id, seq, event_key, type, phase, crew, task, agent, status,
                                progress_pct, output, error_message, duration_ms)
        SELECT p_run_id, seq, e->>'event_key', e->>'type', (e->>'phase')::int, e->>'crew',
               e->>'task', e->>'agent', e->>'status', (e->>'progress_pct')::int,
               NULLIF(e->'output', 'null'::jsonb), e->>'error_message', (e->>'duration_ms')::int
          FROM fresh
        RETURNING seq, created_at
    )
    SELECT jsonb_object_agg(f.e->>'event_key', s.seq),
           jsonb_agg((f.e - 'event_key') || jsonb_build_object('seq', s.seq,
                                                               'created_at', s.created_at)
                     ORDER BY s.seq),
           min(s.seq), max(s.seq)
      INTO v_added, v_rows, v_first, v_through
      FROM stored s JOIN fresh f ON f.seq = s.seq;
    RETURN QUERY
        SELECT g.e->>'event_key', ((v_known || COALESCE(v_added, '{}'::jsonb))
                                   ->> (g.e->>'event_key'))::bigint
          FROM jsonb_array_elements(p_events) WITH ORDINALITY AS g (e, n) ORDER BY g.n;
    IF v_first IS NOT NULL THEN
        UPDATE runs SET last_seq = v_through, updated_at = now() WHERE id = p_run_id;
        v_payload := json_build_object('run_id', p_run_id, 'first', v_first, 'seq', v_through,
                                       'events', v_rows)::text;
        IF octet_length(v_payload) > 7900 THEN
            v_payload := json_build_object('run_id', p_run_id, 'first', v_first,
                                           'seq', v_through)::text;
        END IF;
        PERFORM pg_notify('waystation_events', v_payload);
    END IF;
END
$$;

-- A run's costs move with its row's one UPDATE a write (issue 39, after migration 091). Each
-- event carrying a model call's usage (`output.usage`: a validation task's end, an agent's
-- request) added it to the run's totals by a trigger of its own (migration 010), one more
-- UPDATE of the run's row, one more row version, per such event (a validation run: one a
-- task).
-- append_run_events now sums the usage of the events it inserts and adds it in the row's one
-- UPDATE (with the state and `last_seq`), and the trigger goes. What it counted is unchanged:
-- an event is inserted once per key, so an attempt is counted once, whatever the retries, and
-- the totals commit with the events; a finished run's totals still follow its late events.
-- append_run_events is the one writer of run_events (the kinds' functions call it through
-- apply_progress_write), so no insert goes uncounted.

DROP TRIGGER run_events_add_usage ON run_events;
DROP FUNCTION add_event_usage_to_run();

-- p_usage: the inserted events' usage summed ({cost_usd, input_tokens, output_tokens}).
DROP FUNCTION update_run_progress(uuid, jsonb, bigint);
CREATE FUNCTION update_run_progress(p_id uuid, r jsonb, p_last_seq bigint,
                                    p_usage jsonb DEFAULT NULL)
RETURNS void LANGUAGE sql AS $$
UPDATE runs SET
    status = r->>'status',
    current_phase = (r->>'current_phase')::int,
    phase_name = r->>'phase_name',
    hitl_state = r->>'hitl_state',
    hitl_checkpoint_at = CASE WHEN r->>'hitl_state' IS NULL THEN NULL
                              WHEN hitl_state IS DISTINCT FROM r->>'hitl_state' THEN now()
                              ELSE hitl_checkpoint_at END,
    result = COALESCE(NULLIF(r->'result', 'null'::jsonb), result),
    error_message = COALESCE(r->>'error_message', error_message),
    stop_reason = COALESCE(r->>'stop_reason', stop_reason),
    started_at = COALESCE(started_at, CASE WHEN r->>'status' <> 'pending' THEN now() END),
    completed_at = CASE WHEN r->>'status' IN ('completed', 'failed', 'canceled')
                        THEN COALESCE(completed_at, now()) ELSE completed_at END,
    last_seq = COALESCE(p_last_seq, last_seq),
    cost_usd = cost_usd + COALESCE((p_usage->>'cost_usd')::numeric, 0),
    input_tokens = input_tokens + COALESCE((p_usage->>'input_tokens')::bigint, 0),
    output_tokens = output_tokens + COALESCE((p_usage->>'output_tokens')::bigint, 0),
    updated_at = now()
 WHERE id = p_id AND status NOT IN ('completed', 'failed', 'canceled');
UPDATE hitl_requests SET status = 'superseded', updated_at = now()
 WHERE run_id = p_id AND status = 'pending'
   AND r->>'status' IN ('completed', 'failed', 'canceled');
$$;

-- append_run_events (migration 091's), adding the usage of the events it inserts to the
-- run's totals in the same UPDATE of its row.
CREATE OR REPLACE FUNCTION append_run_events(p_run_id uuid, p_events jsonb,
                                             p_run jsonb DEFAULT NULL)
RETURNS TABLE (out_key text, out_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_last    bigint;
    v_ended   boolean;
    v_known   jsonb;
    v_added   jsonb;
    v_rows    jsonb;
    v_first   bigint;
    v_through bigint;
    v_payload text;
    v_usage   jsonb;
BEGIN
    SELECT r.last_seq, r.status IN ('completed', 'failed', 'canceled') INTO v_last, v_ended
      FROM runs r WHERE r.id = p_run_id FOR NO KEY UPDATE;
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
           min(s.seq), max(s.seq),
           jsonb_build_object(
               'cost_usd', sum((f.e->'output'->'usage'->>'cost_usd')::numeric) FILTER (WHERE m),
               'input_tokens', sum((f.e->'output'->'usage'->>'input_tokens')::bigint) FILTER (WHERE m),
               'output_tokens', sum((f.e->'output'->'usage'->>'output_tokens')::bigint) FILTER (WHERE m))
      INTO v_added, v_rows, v_first, v_through, v_usage
      FROM stored s JOIN fresh f ON f.seq = s.seq,
           LATERAL (SELECT jsonb_typeof(f.e->'output'->'usage') = 'object' AS m) metered;
    RETURN QUERY
        SELECT g.e->>'event_key', ((v_known || COALESCE(v_added, '{}'::jsonb))
                                   ->> (g.e->>'event_key'))::bigint
          FROM jsonb_array_elements(p_events) WITH ORDINALITY AS g (e, n) ORDER BY g.n;
    -- The row's one UPDATE: a finished run's state stays, its `last_seq` and costs still
    -- follow.
    IF p_run IS NOT NULL AND NOT v_ended THEN
        PERFORM update_run_progress(p_run_id, p_run, v_through, v_usage);
    ELSIF v_first IS NOT NULL THEN
        UPDATE runs SET
            last_seq = v_through,
            cost_usd = cost_usd + COALESCE((v_usage->>'cost_usd')::numeric, 0),
            input_tokens = input_tokens + COALESCE((v_usage->>'input_tokens')::bigint, 0),
            output_tokens = output_tokens + COALESCE((v_usage->>'output_tokens')::bigint, 0),
            updated_at = now()
         WHERE id = p_run_id;
    END IF;
    IF v_first IS NOT NULL THEN
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

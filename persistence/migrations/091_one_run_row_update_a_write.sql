-- One UPDATE of a run's row a progress write (issue 39). A write carrying the run's state and
-- events updated the row twice in one statement: its state (update_run_progress), then its
-- `last_seq` (append_run_events), so two row versions and two WAL records, the second UPDATE
-- finding the first's new version. The state now travels into append_run_events, which
-- moves the row once, state and `last_seq` together, after inserting the events. A write
-- without events updates the row as before; one without state moves `last_seq` alone.
--
-- The run's costs move in that same UPDATE. Each event carrying a model call's usage
-- (`output.usage`: a validation task's end, an agent's request) added it to the run's totals
-- by a trigger of its own (migration 010), one more UPDATE of the row, one more row version,
-- per such event. append_run_events now sums the usage of the events it inserts and adds it
-- with the state and `last_seq`, and the trigger goes. What it counted is unchanged: an event
-- is inserted once per key, so an attempt is counted once, whatever the retries, and the
-- totals commit with the events; a finished run's totals still follow its late events.
-- append_run_events is the one writer of run_events (the kinds' functions call it through
-- apply_progress_write), so no insert goes uncounted.
--
-- What each part guarantees is unchanged:
-- - Gapless seqs: the run's row is locked before its `last_seq` is read, so the writers of one
--   run take turns; the keys are looked up, and the new events numbered, under that lock.
--   The lock is FOR NO KEY UPDATE (it was FOR UPDATE): the mode the row's UPDATE takes
--   anyway, which writers still take in turn, but which does not wait for a row that merely
--   references the run (a snapshot, a gate, a kind's row: FOR KEY SHARE). Those now come
--   before the lock in a write, and under FOR UPDATE two such writes of one run could each
--   wait for the other.
-- - Idempotency by (run_id, event_key): a key already stored keeps its seq and is not
--   inserted again; a retried write answers the same seqs and moves `last_seq` no further.
-- - A finished run's state never moves (the guard in apply_progress_write, and the UPDATE's
--   own condition); events appended to it still move its `last_seq`, as before.
-- - Notifications: the status change's (the row's trigger) is queued before the events', as
--   when the state was written first; the events' payload is as before.
-- The functions keep their owner and grants: append_run_events and update_run_progress are
-- made again with PostgreSQL's default (EXECUTE for PUBLIC, as they had); apply_progress_write
-- is replaced in place, keeping its grant to the workers alone (migration 028).

DROP TRIGGER run_events_add_usage ON run_events;
DROP FUNCTION add_event_usage_to_run();

DROP FUNCTION update_run_progress(uuid, text, int, text, text, jsonb, text, text);
-- r: a write's run state (contracts.writes.RunStateWrite, as JSON); p_last_seq: the run's new
-- `last_seq` when the write appended events, NULL to leave it; p_usage: the usage of the
-- events it inserted, summed ({cost_usd, input_tokens, output_tokens}).
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

-- append_run_events (migration 029's), with the run's state to write in the same UPDATE of
-- its row (p_run, as update_run_progress takes it; NULL: the events alone, as before), and
-- the usage of the events it inserts added to the run's costs in that UPDATE.
DROP FUNCTION append_run_events(uuid, jsonb);
CREATE FUNCTION append_run_events(p_run_id uuid, p_events jsonb,
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
    -- The kind's fields before the run's row moves: the write that ends the run still carries
    -- its last ones.
    IF NULLIF(r->'kind_fields', 'null'::jsonb) IS NOT NULL THEN
        PERFORM apply_kind_run_fields(p_run_id, r->'kind_fields');
    END IF;
    IF jsonb_array_length(w->'snapshots') > 0 THEN
        INSERT INTO run_snapshots (run_id, step_ordinal, label, phase, state)
        SELECT p_run_id, sn.step_ordinal, sn.label, sn.phase, sn.state
          FROM jsonb_to_recordset(w->'snapshots')
               AS sn (step_ordinal int, label text, phase int, state jsonb)
        ON CONFLICT (run_id, step_ordinal) DO NOTHING;
    END IF;
    IF jsonb_array_length(w->'events') > 0 THEN
        RETURN QUERY SELECT a.out_key, a.out_seq FROM append_run_events(p_run_id, w->'events', r) a;
    ELSIF r IS NOT NULL THEN
        PERFORM update_run_progress(p_run_id, r, NULL);
    END IF;
END
$$;

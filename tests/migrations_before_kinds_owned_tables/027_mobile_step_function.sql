-- A mobile step's whole write in one round trip (issue 16): the step's claim, artifacts,
-- screen, actions, edge and outcome (as persistence/queries/graph.sql claim_step_outcome and
-- record_claimed_step do), the app's declared activities on a launch, and the read-model
-- write that travels with the step (run state, snapshots, events: as persistence.writes
-- apply_write does for these parts), in the one transaction of one statement.
--
-- p: {run_id, step, app_package, screen (null outside the app), actions, artifacts,
--     from_screen_id, action_id, foreign_package, transitional, declared_activities (null
--     but on a launch), write: {run, snapshots, events}, done_event (its output gets the
--     outcome)}.
-- Returns the outcome, or NULL when the step was recorded before (a retry): then nothing was
-- written, and the caller takes the retry path (persistence.graph record_step).
-- A run's visible state moves through this one statement, from a recorder write
-- (persistence/queries/runs.sql) or a mobile step's one call below; a finished run never
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

CREATE FUNCTION record_mobile_step(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_run uuid := (p->>'run_id')::uuid;
    v_step int := (p->>'step')::int;
    v_app text := p->>'app_package';
    s jsonb := NULLIF(p->'screen', 'null'::jsonb);
    v_from bigint := (p->>'from_screen_id')::bigint;
    v_action bigint := (p->>'action_id')::bigint;
    w jsonb := p->'write';
    r jsonb := NULLIF(w->'run', 'null'::jsonb);
    v_screen bigint;
    v_new_screen boolean := false;
    v_edge bigint;
    v_new_edge boolean := false;
    v_actions jsonb := '{}'::jsonb;
BEGIN
    INSERT INTO graph_persistence_outcomes (run_id, step, app_package)
    VALUES (v_run, v_step, v_app) ON CONFLICT (run_id, step) DO NOTHING;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO run_artifacts (run_id, step, kind, sha256, content_type, size_bytes)
    SELECT v_run, v_step, a.kind, a.sha256, a.content_type, a.size_bytes
      FROM jsonb_to_recordset(p->'artifacts')
           AS a (kind text, sha256 text, content_type text, size_bytes bigint)
    ON CONFLICT (run_id, step, kind) DO NOTHING;
    IF jsonb_typeof(p->'declared_activities') = 'array' THEN
        INSERT INTO apps (app_package, declared_activities)
        VALUES (v_app, ARRAY(SELECT jsonb_array_elements_text(p->'declared_activities')))
        ON CONFLICT (app_package) DO UPDATE
            SET declared_activities = EXCLUDED.declared_activities, updated_at = now();
    END IF;
    IF s IS NOT NULL THEN
        INSERT INTO screens (app_package, activity, layout_hash, content_hash, phash,
                             screenshot_sha, hierarchy_sha, label, first_run_id, first_step)
        VALUES (v_app, s->>'activity', s->>'layout_hash', s->>'content_hash',
                (s->>'phash')::bigint, s->>'screenshot_sha', s->>'hierarchy_sha', s->>'label',
                v_run, v_step)
        ON CONFLICT (app_package, activity, layout_hash)
        DO UPDATE SET visit_count = screens.visit_count + 1, last_seen_at = now()
        RETURNING id, (xmax = 0) INTO v_screen, v_new_screen;
        INSERT INTO actions (screen_id, selector, kind, label, row_group, row_index, sensitive)
        SELECT v_screen, a.selector, a.kind, a.label, a.row_group, a.row_index, a.sensitive
          FROM jsonb_to_recordset(p->'actions') AS a (selector text, kind text, label text,
                                                      row_group text, row_index int,
                                                      sensitive boolean)
        ON CONFLICT (screen_id, selector, kind) DO NOTHING;
        -- A statement of its own: it sees the actions just inserted, and those another run's
        -- step committed meanwhile.
        SELECT COALESCE(jsonb_object_agg(a.kind || ':' || a.selector, a.id), '{}'::jsonb)
          INTO v_actions FROM actions a WHERE a.screen_id = v_screen;
        IF v_from IS NOT NULL AND v_action IS NOT NULL THEN
            INSERT INTO edges (app_package, from_screen_id, action_id, to_screen_id,
                               first_run_id)
            VALUES (v_app, v_from, v_action, v_screen, v_run)
            ON CONFLICT (from_screen_id, action_id, to_screen_id)
            DO UPDATE SET count = edges.count + 1, last_seen_at = now()
            RETURNING id, (xmax = 0) INTO v_edge, v_new_edge;
        END IF;
    END IF;
    UPDATE graph_persistence_outcomes
       SET screen_id = v_screen, from_screen_id = v_from, action_id = v_action,
           edge_id = v_edge, new_screen = v_new_screen, new_edge = v_new_edge,
           foreign_package = p->>'foreign_package',
           transitional = (p->>'transitional')::boolean
     WHERE run_id = v_run AND step = v_step;
    IF r IS NOT NULL THEN
        PERFORM update_run_progress(
            v_run, r->>'status', (r->>'current_phase')::int, r->>'phase_name',
            r->>'hitl_state', NULLIF(r->'result', 'null'::jsonb), r->>'error_message',
            r->>'stop_reason', r->>'context_summary');
    END IF;
    INSERT INTO run_snapshots (run_id, step_ordinal, label, phase, state)
    SELECT v_run, sn.step_ordinal, sn.label, sn.phase, sn.state
      FROM jsonb_to_recordset(w->'snapshots')
           AS sn (step_ordinal int, label text, phase int, state jsonb)
    ON CONFLICT (run_id, step_ordinal) DO NOTHING;
    PERFORM append_run_events(v_run, (w->'events') || jsonb_build_array(
        jsonb_set(p->'done_event', '{output}', (p->'done_event'->'output') || jsonb_build_object(
            'screen_id', v_screen, 'new_screen', v_new_screen, 'new_edge', v_new_edge))));
    RETURN jsonb_build_object('screen_id', v_screen, 'new_screen', v_new_screen,
                              'edge_id', v_edge, 'new_edge', v_new_edge,
                              'action_ids', v_actions);
END
$$;

-- The workers' write path only (the API role has no business writing a step).
REVOKE ALL ON FUNCTION record_mobile_step(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION record_mobile_step(jsonb) TO waystation_worker;

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

-- A run's progress write (its visible state, snapshots and events: what nearly every recorder
-- write, every crew task's first write and every mobile step hold) as one function, so it
-- costs one round trip and one statement's implicit transaction instead of BEGIN, three
-- statements and COMMIT (issue 16; persistence.writes apply_write). Each part stays
-- idempotent: the run row never leaves a terminal status, snapshots by ordinal, events by key.
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

-- record_mobile_step (migration 027) with its read-model part written by apply_progress_write
-- instead of its own copy of the same three statements.
CREATE OR REPLACE FUNCTION record_mobile_step(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_run uuid := (p->>'run_id')::uuid;
    v_step int := (p->>'step')::int;
    v_app text := p->>'app_package';
    s jsonb := NULLIF(p->'screen', 'null'::jsonb);
    v_from bigint := (p->>'from_screen_id')::bigint;
    v_action bigint := (p->>'action_id')::bigint;
    w jsonb := p->'write';
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
    PERFORM * FROM apply_progress_write(v_run, jsonb_set(w, '{events}', (w->'events') ||
        jsonb_build_array(jsonb_set(p->'done_event', '{output}',
            (p->'done_event'->'output') || jsonb_build_object(
                'screen_id', v_screen, 'new_screen', v_new_screen, 'new_edge', v_new_edge)))));
    RETURN jsonb_build_object('screen_id', v_screen, 'new_screen', v_new_screen,
                              'edge_id', v_edge, 'new_edge', v_new_edge,
                              'action_ids', v_actions);
END
$$;

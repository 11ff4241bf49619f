-- record_mobile_step (migration 028) also says whether the step's screen has no perceptual
-- hash stored (issue 16). The worker computes a step's hash while this statement runs rather
-- than before sending it (activities/mobile/steps.py), then stores it only where it is
-- missing: on a new screen, or on a later visit to a screen whose hash a crash between the two
-- statements left out. Everything else the function does is unchanged.
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
    v_phash_missing boolean := false;
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
        RETURNING id, (xmax = 0), phash IS NULL INTO v_screen, v_new_screen, v_phash_missing;
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
                              'action_ids', v_actions, 'phash_missing', v_phash_missing);
END
$$;

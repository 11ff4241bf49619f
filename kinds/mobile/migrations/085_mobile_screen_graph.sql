-- replaces: 005 027 028 030
-- The mobile kind's screen graph (seed 001, issue 16), as the core's migrations 005, 022,
-- 027, 028 and 030 left it before the kind owned its tables (issue 40). A database those
-- core files already reached has all of this: `persistence.migrate` records this file as
-- applied there without running it (the `replaces` line above, see docs/run-kinds.md).
--
-- Screens, their actions, the edges between them and what each exploration step added. The
-- graph belongs to the app and accumulates across runs; per-run views come from
-- graph_persistence_outcomes. Every write is keyed by (run_id, step), chosen by the workflow,
-- so a retried step finds its first outcome and changes nothing. The artifacts a step saw are
-- the core's `run_artifacts` (its artifact store and retention).

CREATE TABLE apps (
    app_package          text PRIMARY KEY,
    declared_activities  text[] NOT NULL DEFAULT '{}',
    updated_at           timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE screens (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app_package     text NOT NULL,
    activity        text NOT NULL,
    layout_hash     text NOT NULL,
    -- Stored beside the key, not part of it (see kinds/mobile/activities/identity.py).
    content_hash    text NOT NULL,
    phash           bigint,          -- compare with bit_count((a # b)::bit(64))
    screenshot_sha  text,            -- the first screenshot seen, in run_artifacts' store
    hierarchy_sha   text,
    label           text NOT NULL DEFAULT '',
    visit_count     bigint NOT NULL DEFAULT 1,
    first_run_id    uuid,
    first_step      int,
    first_seen_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (app_package, activity, layout_hash)
);

CREATE TABLE actions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    screen_id   bigint NOT NULL REFERENCES screens (id) ON DELETE CASCADE,
    selector    text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('tap', 'long_tap', 'input', 'scroll', 'back')),
    label       text NOT NULL DEFAULT '',
    row_group   text,
    row_index   int,
    sensitive   boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (screen_id, selector, kind)
);

CREATE TABLE edges (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app_package     text NOT NULL,
    from_screen_id  bigint NOT NULL REFERENCES screens (id) ON DELETE CASCADE,
    action_id       bigint NOT NULL REFERENCES actions (id) ON DELETE CASCADE,
    to_screen_id    bigint NOT NULL REFERENCES screens (id) ON DELETE CASCADE,
    count           bigint NOT NULL DEFAULT 1,
    first_run_id    uuid,
    first_seen_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (from_screen_id, action_id, to_screen_id)
);
CREATE INDEX idx_edges_app ON edges (app_package);
-- Coverage asks, per action, whether it was tried and where it led.
CREATE INDEX idx_edges_action ON edges (action_id);

CREATE TABLE graph_persistence_outcomes (
    run_id          uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step            int NOT NULL,
    app_package     text NOT NULL,
    screen_id       bigint REFERENCES screens (id) ON DELETE SET NULL,
    from_screen_id  bigint REFERENCES screens (id) ON DELETE SET NULL,
    action_id       bigint REFERENCES actions (id) ON DELETE SET NULL,
    edge_id         bigint REFERENCES edges (id) ON DELETE SET NULL,
    new_screen      boolean NOT NULL DEFAULT false,
    new_edge        boolean NOT NULL DEFAULT false,
    foreign_package text,            -- the step ended outside the app (launcher, browser...)
    transitional    boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step)
);
CREATE INDEX idx_outcomes_screen ON graph_persistence_outcomes (screen_id);
CREATE INDEX idx_outcomes_app ON graph_persistence_outcomes (app_package);

-- A mobile step's whole write in one round trip (issue 16): the step's claim, artifacts,
-- screen, actions, edge and outcome (as kinds/mobile/queries/graph.sql claim_step_outcome and
-- record_claimed_step do), the app's declared activities on a launch, and the read-model
-- write that travels with the step (the core's apply_progress_write), in the one transaction
-- of one statement.
--
-- p: {run_id, step, app_package, screen (null outside the app), actions, artifacts,
--     from_screen_id, action_id, foreign_package, transitional, declared_activities (null
--     but on a launch), write: {run, snapshots, events}, done_event (its output gets the
--     outcome)}.
-- Returns the outcome, or NULL when the step was recorded before (a retry): then nothing was
-- written, and the caller takes the retry path.
CREATE FUNCTION record_mobile_step(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
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

-- The workers' write path only (the API role has no business writing a step).
REVOKE ALL ON FUNCTION record_mobile_step(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION record_mobile_step(jsonb) TO waystation_worker;

-- record_mobile_step, and whether the step's screen has no perceptual hash stored. The
-- worker computes a step's hash while this statement runs rather than before sending it,
-- then stores it only where it is missing: on a new screen, or on a later visit to a screen
-- whose hash a crash between the two statements left out. A wrapper, so the step's write
-- stays the one function above; its look-up is a statement of its own, which sees the
-- screen row just written.
CREATE FUNCTION record_mobile_step_needing_hash(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_outcome jsonb := record_mobile_step(p);
BEGIN
    IF v_outcome IS NULL OR v_outcome->'screen_id' = 'null'::jsonb THEN
        RETURN v_outcome;  -- recorded before, or a step outside the app: no screen to hash
    END IF;
    RETURN v_outcome || jsonb_build_object('phash_missing', (
        SELECT s.phash IS NULL FROM screens s WHERE s.id = (v_outcome->>'screen_id')::bigint));
END
$$;

REVOKE ALL ON FUNCTION record_mobile_step_needing_hash(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION record_mobile_step_needing_hash(jsonb) TO waystation_worker;

-- Row-level security as the core's tables have it (migration 022): the worker sees and
-- writes everything; the API sees a run's outcomes with its run, and an app's screen graph,
-- shared by the runs that explored it, when it sees one of them.
GRANT SELECT, INSERT, UPDATE, DELETE ON apps, screens, actions, edges,
                                        graph_persistence_outcomes
   TO waystation_api, waystation_worker;
GRANT USAGE, SELECT, UPDATE ON SEQUENCE screens_id_seq, actions_id_seq, edges_id_seq
   TO waystation_api, waystation_worker;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['apps', 'screens', 'actions', 'edges',
                             'graph_persistence_outcomes'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY worker_all ON %I TO waystation_worker '
                       'USING (true) WITH CHECK (true)', t);
    END LOOP;
END
$$;
CREATE POLICY api_visible ON graph_persistence_outcomes TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR graph_persistence_outcomes.run_id IN (SELECT waystation_visible_runs()));
CREATE POLICY api_visible ON apps TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR EXISTS (SELECT 1 FROM graph_persistence_outcomes o
                       WHERE o.app_package = apps.app_package));
CREATE POLICY api_visible ON screens TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR EXISTS (SELECT 1 FROM graph_persistence_outcomes o
                       WHERE o.app_package = screens.app_package));
CREATE POLICY api_visible ON edges TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR EXISTS (SELECT 1 FROM graph_persistence_outcomes o
                       WHERE o.app_package = edges.app_package));
CREATE POLICY api_visible ON actions TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR EXISTS (SELECT 1 FROM screens s WHERE s.id = actions.screen_id));

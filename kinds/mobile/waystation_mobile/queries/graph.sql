-- name: claim_step_outcome
-- Claims a step's outcome row and stores its artifacts (arrays $4-$7: kind, sha256, content
-- type, size); nothing returned means the step was already recorded (a retry).
WITH claim AS (
    INSERT INTO graph_persistence_outcomes (run_id, step, app_package) VALUES ($1, $2, $3)
    ON CONFLICT (run_id, step) DO NOTHING
    RETURNING step
), artifacts AS (
    INSERT INTO run_artifacts (run_id, step, kind, sha256, content_type, size_bytes)
    SELECT $1, $2, a.kind, a.sha256, a.content_type, a.size_bytes
      FROM claim, unnest($4::text[], $5::text[], $6::text[], $7::bigint[])
                  AS a (kind, sha256, content_type, size_bytes)
    ON CONFLICT (run_id, step, kind) DO NOTHING
)
SELECT step FROM claim;

-- name: get_step_outcome
-- The recorded outcome of one step.
SELECT * FROM graph_persistence_outcomes WHERE run_id = $1 AND step = $2;

-- name: record_claimed_step
-- A claimed step's graph in one statement: the screen ($4-$10; none when $4 is NULL) found by
-- its key or inserted (a known one counts one more visit), its actions ($11-$16 as arrays;
-- known ones kept), the edge from screen $17 by action $18 (seen again, it counts once more),
-- and the step's outcome row. Returns the screen, the edge and every action of the screen.
WITH screen AS (
    INSERT INTO screens (app_package, activity, layout_hash, content_hash, phash,
                         screenshot_sha, hierarchy_sha, label, first_run_id, first_step)
    SELECT $3, $4, $5, $6, $7, $8, $9, $10, $1, $2 WHERE $4::text IS NOT NULL
    ON CONFLICT (app_package, activity, layout_hash)
    DO UPDATE SET visit_count = screens.visit_count + 1, last_seen_at = now()
    RETURNING id, (xmax = 0) AS inserted
), new_actions AS (
    INSERT INTO actions (screen_id, selector, kind, label, row_group, row_index, sensitive)
    SELECT s.id, a.selector, a.kind, a.label, a.row_group, a.row_index, a.sensitive
      FROM screen s,
           unnest($11::text[], $12::text[], $13::text[], $14::text[], $15::int[],
                  $16::boolean[]) AS a (selector, kind, label, row_group, row_index, sensitive)
    ON CONFLICT (screen_id, selector, kind) DO NOTHING
    RETURNING id, selector, kind
), edge AS (
    INSERT INTO edges (app_package, from_screen_id, action_id, to_screen_id, first_run_id)
    SELECT $3, $17, $18, s.id, $1 FROM screen s
     WHERE $17::bigint IS NOT NULL AND $18::bigint IS NOT NULL
    ON CONFLICT (from_screen_id, action_id, to_screen_id)
    DO UPDATE SET count = edges.count + 1, last_seen_at = now()
    RETURNING id, (xmax = 0) AS inserted
), outcome AS (
    UPDATE graph_persistence_outcomes
       SET screen_id = (SELECT id FROM screen), from_screen_id = $17, action_id = $18,
           edge_id = (SELECT id FROM edge),
           new_screen = COALESCE((SELECT inserted FROM screen), false),
           new_edge = COALESCE((SELECT inserted FROM edge), false),
           foreign_package = $19, transitional = $20
     WHERE run_id = $1 AND step = $2
)
SELECT (SELECT id FROM screen) AS screen_id,
       COALESCE((SELECT inserted FROM screen), false) AS new_screen,
       (SELECT id FROM edge) AS edge_id,
       COALESCE((SELECT inserted FROM edge), false) AS new_edge,
       -- Actions stored before this statement, and those it inserted (which it cannot see).
       (SELECT COALESCE(jsonb_object_agg(a.kind || ':' || a.selector, a.id), '{}'::jsonb)
          FROM (SELECT id, selector, kind FROM new_actions
                UNION ALL
                SELECT id, selector, kind FROM actions
                 WHERE screen_id = (SELECT id FROM screen)) a) AS action_ids;

-- name: insert_actions
-- The actionable elements of a screen; those already known are kept as they are.
INSERT INTO actions (screen_id, selector, kind, label, row_group, row_index, sensitive)
SELECT $1, a.selector, a.kind, a.label, a.row_group, a.row_index, a.sensitive
  FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::boolean[])
       AS a (selector, kind, label, row_group, row_index, sensitive)
ON CONFLICT (screen_id, selector, kind) DO NOTHING;

-- name: screen_actions
-- Every action of a screen.
SELECT id, selector, kind FROM actions WHERE screen_id = $1;

-- name: upsert_app
-- The activities an app declares (its manifest), for activity coverage.
INSERT INTO apps (app_package, declared_activities) VALUES ($1, $2)
ON CONFLICT (app_package) DO UPDATE SET declared_activities = EXCLUDED.declared_activities,
                                        updated_at = now();

-- name: get_app
-- One app's declared activities.
SELECT * FROM apps WHERE app_package = $1;

-- name: app_screens
-- Every screen of an app.
SELECT * FROM screens WHERE app_package = $1 ORDER BY id;

-- name: app_edges
-- Every edge of an app, with the action that makes it.
SELECT e.*, a.selector, a.kind AS action_kind, a.label AS action_label
  FROM edges e JOIN actions a ON a.id = e.action_id
 WHERE e.app_package = $1 ORDER BY e.id;

-- name: run_screens
-- The screens a run saw.
SELECT * FROM screens WHERE id IN (
    SELECT screen_id FROM graph_persistence_outcomes WHERE run_id = $1) ORDER BY id;

-- name: run_edges
-- The edges a run walked, counted within the run.
SELECT e.id, e.app_package, e.from_screen_id, e.action_id, e.to_screen_id,
       count(*) AS count, min(o.created_at) AS first_seen_at, max(o.created_at) AS last_seen_at,
       a.selector, a.kind AS action_kind, a.label AS action_label
  FROM graph_persistence_outcomes o
  JOIN edges e ON e.id = o.edge_id JOIN actions a ON a.id = e.action_id
 WHERE o.run_id = $1
 GROUP BY e.id, a.id ORDER BY e.id;

-- name: app_action_counts
-- Actions of an app: discovered, tried (by any run), effective (led to another screen).
WITH a AS (SELECT a.id, a.screen_id FROM actions a JOIN screens s ON s.id = a.screen_id
            WHERE s.app_package = $1),
     e AS (SELECT action_id, bool_or(to_screen_id <> from_screen_id) AS effective
             FROM edges WHERE app_package = $1 GROUP BY action_id),
     t AS (SELECT DISTINCT action_id FROM graph_persistence_outcomes
            WHERE app_package = $1 AND action_id IS NOT NULL)
SELECT count(*) AS discovered, count(t.action_id) AS tried,
       count(*) FILTER (WHERE e.effective) AS effective,
       count(*) FILTER (WHERE NOT e.effective) AS ineffective,
       count(DISTINCT a.screen_id) FILTER (WHERE t.action_id IS NULL) AS frontier_screens
  FROM a LEFT JOIN e ON e.action_id = a.id LEFT JOIN t ON t.action_id = a.id;

-- name: app_discovery
-- New screens per 100 steps, per run of the app.
SELECT run_id, step / 100 AS bucket, count(*) AS steps,
       count(*) FILTER (WHERE new_screen) AS new_screens,
       min(created_at) AS started_at
  FROM graph_persistence_outcomes WHERE app_package = $1
 GROUP BY run_id, step / 100 ORDER BY started_at, bucket;

-- name: similar_screens
-- Screens of an app whose screenshot is within $3 bits of a perceptual hash.
SELECT id, bit_count((phash # $2)::bit(64)) AS distance FROM screens
 WHERE app_package = $1 AND phash IS NOT NULL AND bit_count((phash # $2)::bit(64)) <= $3
 ORDER BY distance, id;

-- name: list_run_artifacts
-- A run's artifacts, by step ($2 NULL: every step).
SELECT step, kind, sha256, content_type, size_bytes, created_at FROM run_artifacts
 WHERE run_id = $1 AND ($2::int IS NULL OR step = $2) ORDER BY step, kind LIMIT 10000;

-- name: artifact_content_type
-- The content type of a stored artifact, if any run stored it.
SELECT content_type FROM run_artifacts WHERE sha256 = $1 LIMIT 1;

-- name: screen_by_key
-- A screen by its key (app, activity, layout hash).
SELECT id FROM screens WHERE app_package = $1 AND activity = $2 AND layout_hash = $3;

-- name: insert_screen_quietly
-- Records a screen seen by a retried step without counting a visit (the first attempt did).
INSERT INTO screens (app_package, activity, layout_hash, content_hash, phash, screenshot_sha,
                     hierarchy_sha, label, first_run_id, first_step)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (app_package, activity, layout_hash) DO NOTHING
RETURNING id;

-- name: readable_artifacts
-- Which of the artifacts $1 a run that stored it makes readable by $2 (its owner or a member
-- of its group; NULL: the service role, any run).
SELECT DISTINCT a.sha256 FROM run_artifacts a JOIN runs r ON r.id = a.run_id
 WHERE a.sha256 = ANY($1::text[]) AND r.erased_at IS NULL
   AND ($2::text IS NULL OR r.owner = $2 OR r.group_id IN
        (SELECT group_id FROM group_members WHERE user_name = $2));

-- name: may_read_app
-- Whether a run that explored the app is readable by $2 (its owner or a member of its
-- group; NULL: the service role, any run).
SELECT EXISTS (SELECT 1 FROM graph_persistence_outcomes g JOIN runs r ON r.id = g.run_id
                WHERE g.app_package = $1 AND r.erased_at IS NULL
                  AND ($2::text IS NULL OR r.owner = $2 OR r.group_id IN
                       (SELECT group_id FROM group_members WHERE user_name = $2)));

-- name: record_mobile_step
-- A whole mobile step in one call (migrations 027, 030); NULL when the step was recorded
-- before. $1 is the JSON text (persistence.graph OneCallStep), parsed once here.
SELECT record_mobile_step_needing_hash($1::text::jsonb);

-- name: fill_screen_phash
-- A screen's perceptual hash, stored once (record_step_in_one_call, where it is missing).
UPDATE screens SET phash = $2 WHERE id = $1 AND phash IS NULL;

-- name: copy_fork_steps
-- A forked run ($1) starts with its source's ($2) steps up to $3, as its own: the screens and
-- edges are the app's, shared, so nothing is duplicated; what those steps discovered the
-- source discovered (new_screen and new_edge false). Copied again, nothing changes.
INSERT INTO graph_persistence_outcomes (run_id, step, app_package, screen_id, from_screen_id,
                                        action_id, edge_id, new_screen, new_edge,
                                        foreign_package, transitional, created_at)
SELECT $1, step, app_package, screen_id, from_screen_id, action_id, edge_id, false, false,
       foreign_package, transitional, created_at
  FROM graph_persistence_outcomes WHERE run_id = $2 AND step <= $3
ON CONFLICT (run_id, step) DO NOTHING;

-- name: run_steps
-- A run's recorded steps in order, each with its screen's activity.
SELECT o.step, o.screen_id, s.activity, o.from_screen_id, o.action_id, o.foreign_package
  FROM graph_persistence_outcomes o LEFT JOIN screens s ON s.id = o.screen_id
 WHERE o.run_id = $1 ORDER BY o.step;

-- name: run_screen_actions
-- Every action of the screens a run saw.
SELECT a.id, a.screen_id, a.selector, a.kind, a.label, a.row_group, a.row_index, a.sensitive
  FROM actions a
 WHERE a.screen_id IN (SELECT screen_id FROM graph_persistence_outcomes WHERE run_id = $1)
 ORDER BY a.id;

-- name: forget_screen_artifacts
-- The app graph's screens stop pointing at artifacts that are deleted.
UPDATE screens
   SET screenshot_sha = CASE WHEN screenshot_sha = ANY($1::text[]) THEN NULL
                             ELSE screenshot_sha END,
       hierarchy_sha = CASE WHEN hierarchy_sha = ANY($1::text[]) THEN NULL
                            ELSE hierarchy_sha END
 WHERE screenshot_sha = ANY($1::text[]) OR hierarchy_sha = ANY($1::text[]);

-- name: archive_graph_outcomes
-- The graph outcomes of each of the given runs, for the retention sweep's archive.
SELECT run_id, coalesce(jsonb_agg(to_jsonb(g) ORDER BY g.step), '[]')::text AS outcomes
  FROM graph_persistence_outcomes g
 WHERE run_id = ANY($1::uuid[])
 GROUP BY run_id;

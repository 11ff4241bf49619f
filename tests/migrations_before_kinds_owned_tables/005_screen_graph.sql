-- The screen graph of mobile apps (seed 001): screens, their actions, the edges between them,
-- what each exploration step added, and the artifacts (screenshots, hierarchies) it saw.
-- The graph belongs to the app and accumulates across runs; per-run views come from
-- graph_persistence_outcomes. Every write is keyed by (run_id, step), chosen by the workflow,
-- so a retried step finds its first outcome and changes nothing.

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
    -- Stored beside the key, not part of it (see activities/mobile/identity.py).
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

CREATE TABLE run_artifacts (
    run_id        uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step          int NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('screenshot', 'hierarchy')),
    sha256        text NOT NULL,     -- content address in the artifact store
    content_type  text NOT NULL,
    size_bytes    int NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step, kind)
);
CREATE INDEX idx_run_artifacts_sha ON run_artifacts (sha256);

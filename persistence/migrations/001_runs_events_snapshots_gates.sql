-- The read model of every run: one row per run, an append-only event log with a gapless
-- per-run seq, full-state snapshots, and the human-decision queue.

CREATE TABLE runs (
    id                 uuid PRIMARY KEY,
    kind               text NOT NULL,
    owner              text NOT NULL,
    group_id           text,
    workflow_id        text NOT NULL UNIQUE,
    idempotency_key    text,
    status             text NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'running', 'paused', 'completed', 'failed', 'canceled')),
    current_phase      int NOT NULL DEFAULT 0,
    phase_name         text,
    hitl_state         text,            -- the pending checkpoint name, if any
    hitl_checkpoint_at timestamptz,
    input              jsonb NOT NULL DEFAULT '{}'::jsonb,
    result             jsonb,
    error_message      text,
    last_seq           bigint NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL DEFAULT now(),
    started_at         timestamptz,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    completed_at       timestamptz,
    UNIQUE (owner, idempotency_key)
);
CREATE INDEX idx_runs_owner ON runs (owner, created_at DESC, id DESC);
CREATE INDEX idx_runs_status ON runs (status);
CREATE INDEX idx_runs_kind ON runs (kind);
CREATE INDEX idx_runs_group_id ON runs (group_id) WHERE group_id IS NOT NULL;

CREATE TABLE run_events (
    id             bigserial PRIMARY KEY,
    run_id         uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq            bigint NOT NULL,
    -- Chosen by the writer (workflow or activity) so a retried write finds its first copy.
    event_key      text NOT NULL,
    type           text NOT NULL,
    phase          int,
    crew           text,
    task           text,
    agent          text,
    status         text,
    progress_pct   int CHECK (progress_pct BETWEEN 0 AND 100),
    output         jsonb,
    error_message  text,
    duration_ms    int,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, seq),
    UNIQUE (run_id, event_key)
);
CREATE INDEX idx_run_events_created_at ON run_events (created_at);

CREATE TABLE run_snapshots (
    run_id        uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_ordinal  int NOT NULL,
    label         text NOT NULL,
    phase         int,
    state         jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step_ordinal)
);

CREATE TABLE hitl_requests (
    id                  uuid PRIMARY KEY,
    run_id              uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    checkpoint_name     text NOT NULL,
    phase               int NOT NULL,
    title               text NOT NULL,
    description         text NOT NULL,
    context             jsonb NOT NULL DEFAULT '{}'::jsonb,
    options             jsonb NOT NULL DEFAULT '[]'::jsonb,
    recommended_option  text,
    digest              text NOT NULL,
    expiry_policy       text NOT NULL DEFAULT 'pause' CHECK (expiry_policy IN ('pause', 'fail', 'default')),
    default_option      text,
    status              text NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'superseded')),
    decision            text,
    feedback            text,
    decision_at         timestamptz,
    decision_by         text,
    expires_at          timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idx_hitl_requests_run_id ON hitl_requests (run_id);
CREATE INDEX idx_hitl_requests_status ON hitl_requests (status);
CREATE INDEX idx_hitl_requests_checkpoint ON hitl_requests (checkpoint_name);
-- At most one open request per checkpoint of a run: opening a new one supersedes the old.
CREATE UNIQUE INDEX uq_hitl_requests_one_pending
    ON hitl_requests (run_id, checkpoint_name) WHERE status = 'pending';

-- Live model tokens (issue 43). A model request publishes its text and tool-argument deltas
-- as they arrive, on an ephemeral path beside the durable events: each delta is appended to
-- one compact row per message (what a client connecting mid-answer catches up from) and
-- announced on `waystation_deltas` in the same statement. Never a run event, never a `seq`:
-- the finished message stays the durable event it is, carrying the same `message_id`.
--
-- `attempt` is the model request's attempt: a retried request's first delta (or its reset)
-- clears what the failed attempt wrote and announces a reset, so clients drop what they showed
-- of it. `at` in a notice is the offset of its delta in its part, so a client that caught up
-- from the row drops or trims what it already has.

CREATE TABLE message_partials (
    run_id     uuid        NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    message_id text        NOT NULL,
    attempt    integer     NOT NULL,
    text       text        NOT NULL DEFAULT '',
    -- {call_id: {"name": tool, "args": "the arguments' JSON so far"}}
    tool_calls jsonb       NOT NULL DEFAULT '{}'::jsonb,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, message_id)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON message_partials TO waystation_api, waystation_worker;
ALTER TABLE message_partials ENABLE ROW LEVEL SECURITY;
ALTER TABLE message_partials FORCE ROW LEVEL SECURITY;
CREATE POLICY worker_all ON message_partials TO waystation_worker USING (true) WITH CHECK (true);
-- Visible with its run, as its events are.
CREATE POLICY api_visible ON message_partials TO waystation_api
    USING (waystation_claims_role() = 'service'
           OR message_partials.run_id IN (SELECT waystation_visible_runs()));

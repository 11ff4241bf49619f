-- What a run's model calls cost, summed over every attempt (failed ones included).
--
-- Each attempt of a model call writes one event (task.completed or task.failed) whose
-- `output.usage` holds its tokens and cost. The run's totals follow those rows by trigger:
-- an event is inserted once per key (append_run_events), so a retried write or a replayed
-- workflow never counts an attempt twice, and the totals commit with the event itself.
-- (Edited when the kinds came to own their tables, issue 40: the batch kind's cost columns
-- are its own migration's.)
ALTER TABLE runs
    ADD COLUMN IF NOT EXISTS cost_usd      numeric(18, 9) NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS input_tokens  bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS output_tokens bigint NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION add_event_usage_to_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runs SET
        cost_usd = cost_usd + COALESCE((NEW.output->'usage'->>'cost_usd')::numeric, 0),
        input_tokens = input_tokens + COALESCE((NEW.output->'usage'->>'input_tokens')::bigint, 0),
        output_tokens = output_tokens + COALESCE((NEW.output->'usage'->>'output_tokens')::bigint, 0)
     WHERE id = NEW.run_id;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS run_events_add_usage ON run_events;
CREATE TRIGGER run_events_add_usage AFTER INSERT ON run_events
    FOR EACH ROW WHEN (jsonb_typeof(NEW.output->'usage') = 'object')
    EXECUTE FUNCTION add_event_usage_to_run();


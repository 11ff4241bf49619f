-- A message's partial (migration 080) ends when its durable event is committed: an event
-- whose output names the `message_id` (the model's response, the agent's answer) deletes it
-- in the same transaction, so a client never catches up from a partial of a message it can
-- already read whole. A run that ends drops what it was writing (a request that failed on
-- every attempt never gets its durable event).

CREATE FUNCTION end_message_partial() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM message_partials
     WHERE run_id = NEW.run_id AND message_id = NEW.output ->> 'message_id';
    RETURN NULL;
END
$$;

CREATE TRIGGER run_events_end_message_partial AFTER INSERT ON run_events
    FOR EACH ROW WHEN (NEW.output ? 'message_id')
    EXECUTE FUNCTION end_message_partial();

CREATE FUNCTION end_run_message_partials() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM message_partials WHERE run_id = NEW.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER runs_end_message_partials AFTER UPDATE OF status ON runs
    FOR EACH ROW WHEN (NEW.status IN ('completed', 'failed', 'canceled')
                       AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION end_run_message_partials();

-- A message's partial (migration 080) ends when its durable event is committed: an event
-- whose output names the `message_id` (the model's response, the agent's answer) deletes it
-- in the same transaction, so a client never catches up from a partial of a message it can
-- already read whole.

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

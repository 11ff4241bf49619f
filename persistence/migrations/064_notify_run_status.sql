-- A run's status change is a notice of its own (issue 44): live loops waiting for a status
-- (A2A's blocking SendMessage and the end of its streams, AG-UI's run end, MCP's
-- `tasks/result`) wake when the runs row's status changes, not at the next heartbeat. The
-- status often changes after the run's last event (an agent run pauses for its next message
-- with a state write that carries no event), so the events' notices do not tell of it.
--
-- Sent at commit on its own channel, in commit order with `waystation_events` and
-- `waystation_access` on the API's one listening connection (api/event_hub.py); it carries no
-- rows and announces no seq: the table stays the source of truth.
CREATE FUNCTION notify_run_status() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('waystation_status',
                      json_build_object('run_id', NEW.id, 'status', NEW.status)::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER runs_notify_status AFTER UPDATE OF status ON runs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION notify_run_status();

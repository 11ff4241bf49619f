-- Wakes decision-inbox streams when a request opens or closes. The payload is small (ids and
-- status only, far below NOTIFY's 8000-byte limit); listeners read the row itself.
CREATE FUNCTION notify_gate_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('waystation_gates', json_build_object(
        'request_id', NEW.id, 'run_id', NEW.run_id, 'status', NEW.status,
        'owner', (SELECT owner FROM runs WHERE id = NEW.run_id))::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER hitl_requests_notify
AFTER INSERT OR UPDATE OF status ON hitl_requests
FOR EACH ROW EXECUTE FUNCTION notify_gate_change();

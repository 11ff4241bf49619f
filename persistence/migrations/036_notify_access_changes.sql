-- Open streams check their caller again when access may have ended (issue 25): a membership,
-- an API key, a console session or a user (an erasure request) changes, or a run is hidden or
-- moves. The API's event hub LISTENs on `waystation_access`; a notice names the caller whose
-- streams check again (`user`: a user, or a group key's member `apikey:<id>`) or the run whose
-- streams do (`run_id`). Sent at commit, in commit order with the events of
-- `waystation_events` on the same listening connection: a stream hears of a removal before
-- it is handed any event committed after it. Identical notices of one transaction are sent
-- once (Postgres folds them).

CREATE FUNCTION notify_access_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_row record;
    v_user text;
BEGIN
    IF TG_OP = 'DELETE' THEN v_row := OLD; ELSE v_row := NEW; END IF;
    -- Separate statements: a record field is resolved when its statement runs, and only
    -- api_keys has `group_id` and `owner`.
    IF TG_TABLE_NAME = 'api_keys' THEN
        v_user := CASE WHEN v_row.group_id IS NULL THEN v_row.owner
                       ELSE 'apikey:' || v_row.id END;
    ELSE
        v_user := v_row.user_name;
    END IF;
    PERFORM pg_notify('waystation_access', json_build_object('user', v_user)::text);
    RETURN NULL;
END
$$;

-- Memberships: a removal ends reading; an addition or a role change changes what an inbox
-- is handed.
CREATE TRIGGER group_members_notify_access AFTER INSERT OR UPDATE OR DELETE ON group_members
    FOR EACH ROW EXECUTE FUNCTION notify_access_change();
CREATE TRIGGER api_keys_notify_access AFTER UPDATE OF revoked_at OR DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION notify_access_change();
CREATE TRIGGER console_sessions_notify_access AFTER UPDATE OF revoked_at OR DELETE
    ON console_sessions FOR EACH ROW EXECUTE FUNCTION notify_access_change();
-- An erasure request: the user's signed tokens stop counting (token_cutoffs, migration 035).
CREATE TRIGGER user_erasures_notify_access AFTER INSERT OR UPDATE ON user_erasures
    FOR EACH ROW EXECUTE FUNCTION notify_access_change();

CREATE FUNCTION notify_run_access_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('waystation_access', json_build_object('run_id', NEW.id)::text);
    RETURN NULL;
END
$$;

-- A run hidden (erased) or given another owner or group: its streams check their callers.
CREATE TRIGGER runs_notify_access AFTER UPDATE OF erased_at, owner, group_id ON runs
    FOR EACH ROW
    WHEN (OLD.erased_at IS DISTINCT FROM NEW.erased_at OR OLD.owner IS DISTINCT FROM NEW.owner
          OR OLD.group_id IS DISTINCT FROM NEW.group_id)
    EXECUTE FUNCTION notify_run_access_change();

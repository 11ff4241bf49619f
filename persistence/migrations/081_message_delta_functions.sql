-- Publishing a delta or a reset (migration 080): one statement that updates the message's row
-- and notifies, so a notice never announces what the row does not hold.

-- Append `p_delta` to the message's text (`p_call_id` NULL) or to the arguments of its tool
-- call `p_call_id` (named `p_tool`); a newer attempt first clears the row (and says so).
CREATE FUNCTION publish_message_delta(p_run_id uuid, p_message_id text, p_attempt integer,
                                      p_call_id text, p_tool text, p_delta text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_row message_partials;
    v_at integer;
BEGIN
    INSERT INTO message_partials (run_id, message_id, attempt)
    VALUES (p_run_id, p_message_id, p_attempt)
    ON CONFLICT (run_id, message_id) DO NOTHING;
    SELECT * INTO v_row FROM message_partials
     WHERE run_id = p_run_id AND message_id = p_message_id FOR UPDATE;
    IF v_row.attempt > p_attempt THEN
        RETURN;  -- a late delta of an attempt already given up
    END IF;
    IF v_row.attempt < p_attempt THEN
        PERFORM publish_message_reset(p_run_id, p_message_id, p_attempt);
        v_row.text := '';
        v_row.tool_calls := '{}'::jsonb;
    END IF;
    IF p_call_id IS NULL THEN
        v_at := length(v_row.text);
        UPDATE message_partials SET text = text || p_delta, updated_at = now()
         WHERE run_id = p_run_id AND message_id = p_message_id;
    ELSE
        v_at := coalesce(length(v_row.tool_calls -> p_call_id ->> 'args'), 0);
        UPDATE message_partials
           SET tool_calls = tool_calls || jsonb_build_object(p_call_id, jsonb_build_object(
                   'name', coalesce(p_tool, tool_calls -> p_call_id ->> 'name'),
                   'args', coalesce(tool_calls -> p_call_id ->> 'args', '') || p_delta)),
               updated_at = now()
         WHERE run_id = p_run_id AND message_id = p_message_id;
    END IF;
    PERFORM pg_notify('waystation_deltas', json_build_object(
        'run_id', p_run_id, 'message_id', p_message_id, 'attempt', p_attempt,
        'call_id', p_call_id, 'tool', p_tool, 'at', v_at, 'delta', p_delta)::text);
END
$$;

-- A retried model request starts over: what its failed attempt published is cleared.
CREATE FUNCTION publish_message_reset(p_run_id uuid, p_message_id text, p_attempt integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO message_partials (run_id, message_id, attempt)
    VALUES (p_run_id, p_message_id, p_attempt)
    ON CONFLICT (run_id, message_id) DO UPDATE
       SET attempt = excluded.attempt, text = '', tool_calls = '{}'::jsonb, updated_at = now()
     WHERE message_partials.attempt <= excluded.attempt;
    PERFORM pg_notify('waystation_deltas', json_build_object(
        'run_id', p_run_id, 'message_id', p_message_id, 'attempt', p_attempt,
        'reset', true)::text);
END
$$;

GRANT EXECUTE ON FUNCTION publish_message_delta(uuid, text, integer, text, text, text),
                          publish_message_reset(uuid, text, integer) TO waystation_worker;

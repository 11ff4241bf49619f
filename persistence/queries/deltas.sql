-- name: publish_message_delta
-- Append a text delta ($4 NULL) or a tool call's argument delta to a message's partial, and announce it.
SELECT publish_message_delta($1, $2, $3, $4, $5, $6);

-- name: publish_message_reset
-- A retried model request starts over: clear its message's partial, and announce the reset.
SELECT publish_message_reset($1, $2, $3);

-- name: list_message_partials
-- The messages of a run being written now (their durable events not committed yet), oldest first.
SELECT * FROM message_partials WHERE run_id = $1 ORDER BY updated_at, message_id;

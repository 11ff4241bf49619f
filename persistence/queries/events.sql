-- name: append_events
-- Appends events idempotently by key; returns each key's seq (see migrations 002 and 091).
SELECT out_key, out_seq FROM append_run_events($1, $2::jsonb);

-- name: list_events
-- Events of a run after a seq, in seq order.
SELECT * FROM run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3;

-- name: list_events_of_types
-- Events of some types of a run after a seq, in seq order (an agent run's transcript).
SELECT * FROM run_events WHERE run_id = $1 AND seq > $2 AND type = ANY($4::text[])
 ORDER BY seq LIMIT $3;

-- name: create_event_partitions
-- The monthly partitions of run_events from this month through $1 months ahead that are
-- missing (see migration 021); returns how many were created.
SELECT create_run_events_partitions(now(), now() + make_interval(months => $1));

-- name: drop_empty_event_partitions
-- The monthly partitions of run_events before this month that retention emptied, dropped
-- (see migration 021); returns how many were dropped.
SELECT drop_empty_run_events_partitions(date_trunc('month', now(), 'UTC'));

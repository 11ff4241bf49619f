-- name: metrics_runs
-- Runs by kind and status, with the events they appended (`last_seq` is each run's count).
SELECT kind, status, count(*) AS runs, coalesce(sum(last_seq), 0)::bigint AS events
  FROM runs GROUP BY kind, status;

-- name: metrics_pending_gates
-- Pending decision requests by run kind, and how long the oldest has waited (seconds).
SELECT r.kind, count(*) AS pending,
       extract(epoch FROM now() - min(h.created_at))::float8 AS oldest_age_seconds
  FROM hitl_requests h JOIN runs r ON r.id = h.run_id
 WHERE h.status = 'pending'
 GROUP BY r.kind;

-- name: metrics_decision_latency
-- Decided requests by run kind and latency bucket ($1: upper bounds in seconds, ascending;
-- bucket i counts latencies in [$1[i], $1[i+1]), bucket 0 those below $1[1]).
SELECT r.kind,
       width_bucket(extract(epoch FROM h.decision_at - h.created_at)::float8, $1::float8[])
           AS bucket,
       count(*) AS decided,
       sum(extract(epoch FROM h.decision_at - h.created_at))::float8 AS seconds
  FROM hitl_requests h JOIN runs r ON r.id = h.run_id
 WHERE h.decision IS NOT NULL AND h.decision_at IS NOT NULL  -- decided, not expired
 GROUP BY r.kind, bucket;

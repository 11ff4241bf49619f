-- name: rollup_figures
-- Decision counts from the daily roll-ups the caller may read (row-level security), per day,
-- per gate and in all ($1 first day, then kind, gate, group, project; NULL: any).
SELECT GROUPING(day, kind, gate) AS level, day, kind, gate,
       coalesce(sum(approved), 0)::int AS approved,
       coalesce(sum(rejected), 0)::int AS rejected,
       coalesce(sum(expired), 0)::int AS expired,
       coalesce(sum(superseded), 0)::int AS superseded,
       coalesce(sum(policy_decided), 0)::int AS policy_decided,
       coalesce(sum(recommended), 0)::int AS recommended,
       coalesce(sum(overruled), 0)::int AS overruled,
       coalesce(sum(reminders), 0)::int AS reminders
  FROM decision_rollups
 WHERE day >= $1 AND ($2::text IS NULL OR kind = $2) AND ($3::text IS NULL OR gate = $3)
   AND ($4::uuid IS NULL OR group_id = $4) AND ($5::text IS NULL OR project_id = $5)
 GROUP BY GROUPING SETS ((day), (kind, gate), ());

-- name: rollup_histograms
-- The time-to-decide histograms of the same roll-ups, summed per day, per gate and in all:
-- one row per non-empty bucket.
SELECT GROUPING(d.day, d.kind, d.gate) AS level, d.day, d.kind, d.gate, u.bucket::int,
       sum(u.n)::int AS n
  FROM decision_rollups d CROSS JOIN LATERAL unnest(d.hist) WITH ORDINALITY AS u(n, bucket)
 WHERE d.day >= $1 AND ($2::text IS NULL OR d.kind = $2) AND ($3::text IS NULL OR d.gate = $3)
   AND ($4::uuid IS NULL OR d.group_id = $4) AND ($5::text IS NULL OR d.project_id = $5)
   AND u.n > 0
 GROUP BY GROUPING SETS ((d.day, u.bucket), (d.kind, d.gate, u.bucket), (u.bucket));

-- name: raw_figures
-- The same figures read from the requests themselves, with exact percentiles: for a person's
-- decisions ($6, who decided), and as the benchmark's baseline. Only closed requests of runs
-- the caller may read, closed since $1.
WITH closed AS (
    SELECT (coalesce(h.decision_at, h.updated_at) AT TIME ZONE 'UTC')::date AS day, r.kind,
           decision_gate(h.checkpoint_name) AS gate, h.status, h.decision, h.decision_by,
           h.recommended_option, h.reminders_sent,
           CASE WHEN h.status IN ('approved', 'rejected') AND h.decision_at IS NOT NULL
                THEN greatest(0, extract(epoch FROM h.decision_at - h.created_at))::float8
           END AS took
      FROM hitl_requests h JOIN runs r ON r.id = h.run_id
     WHERE h.status <> 'pending' AND coalesce(h.decision_at, h.updated_at) >= $1
       AND r.erased_at IS NULL
       AND ($2::text IS NULL OR r.kind = $2)
       AND ($3::text IS NULL OR decision_gate(h.checkpoint_name) = $3)
       AND ($4::uuid IS NULL OR r.group_id = $4) AND ($5::text IS NULL OR r.project_id = $5)
       AND ($6::text IS NULL OR h.decision_by = $6))
SELECT GROUPING(day, kind, gate) AS level, day, kind, gate,
       count(*) FILTER (WHERE status = 'approved')::int AS approved,
       count(*) FILTER (WHERE status = 'rejected')::int AS rejected,
       count(*) FILTER (WHERE status = 'expired')::int AS expired,
       count(*) FILTER (WHERE status = 'superseded')::int AS superseded,
       count(*) FILTER (WHERE took IS NOT NULL AND decision_by LIKE 'policy:%')::int
           AS policy_decided,
       count(*) FILTER (WHERE took IS NOT NULL AND recommended_option IS NOT NULL)::int
           AS recommended,
       count(*) FILTER (WHERE took IS NOT NULL AND recommended_option IS NOT NULL
                              AND decision IS DISTINCT FROM recommended_option)::int
           AS overruled,
       coalesce(sum(reminders_sent) FILTER (WHERE took IS NOT NULL), 0)::int AS reminders,
       percentile_cont(ARRAY[0.5, 0.9, 0.99]) WITHIN GROUP (ORDER BY took)
           FILTER (WHERE took IS NOT NULL) AS percentiles
  FROM closed
 GROUP BY GROUPING SETS ((day), (kind, gate), ());

-- name: waiting_figures
-- Requests pending now, and those of them past their expiry (overdue), that the caller may
-- read (kind, gate, group, project, and $5: a person named among their deciders).
SELECT count(*)::int AS pending,
       count(*) FILTER (WHERE h.expires_at < now())::int AS overdue
  FROM hitl_requests h JOIN runs r ON r.id = h.run_id
 WHERE h.status = 'pending' AND r.erased_at IS NULL
   AND ($1::text IS NULL OR r.kind = $1)
   AND ($2::text IS NULL OR decision_gate(h.checkpoint_name) = $2)
   AND ($3::uuid IS NULL OR r.group_id = $3) AND ($4::text IS NULL OR r.project_id = $4)
   AND ($5::text IS NULL OR $5 = ANY (h.decider_users) OR r.owner = $5);

-- name: shadow_agreement
-- Shadow policies' verdicts beside the people's decisions on the same requests (closed
-- since $1, filtered as above; $6: decided by this person).
SELECT count(*)::int AS compared,
       count(*) FILTER (WHERE e.decision = g.decision)::int AS agreed
  FROM policy_evaluations e
  JOIN hitl_requests g ON g.id = e.request_id
  JOIN runs r ON r.id = e.run_id
 WHERE e.mode = 'shadow' AND e.outcome = 'decide'
   AND g.status IN ('approved', 'rejected') AND g.decision_by NOT LIKE 'policy:%'
   AND g.decision_at >= $1 AND r.erased_at IS NULL
   AND ($2::text IS NULL OR r.kind = $2)
   AND ($3::text IS NULL OR decision_gate(g.checkpoint_name) = $3)
   AND ($4::uuid IS NULL OR r.group_id = $4) AND ($5::text IS NULL OR r.project_id = $5)
   AND ($6::text IS NULL OR g.decision_by = $6);

-- name: time_to_decide_histograms
-- Every decided request's time to decide, by kind and gate (GET /metrics; the service's
-- claims): the roll-ups' histograms and seconds summed over all days.
WITH buckets AS (
    SELECT d.kind, d.gate, u.bucket::int AS bucket, sum(u.n)::int AS n
      FROM decision_rollups d CROSS JOIN LATERAL unnest(d.hist) WITH ORDINALITY AS u(n, bucket)
     WHERE u.n > 0
     GROUP BY d.kind, d.gate, u.bucket),
sums AS (SELECT kind, gate, sum(seconds)::float8 AS seconds FROM decision_rollups
          GROUP BY kind, gate)
SELECT b.kind, b.gate, b.bucket, b.n, s.seconds
  FROM buckets b JOIN sums s USING (kind, gate)
 ORDER BY b.kind, b.gate, b.bucket;

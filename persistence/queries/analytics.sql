-- name: rollup_figures
-- Decision counts and time-to-decide histograms from the daily roll-ups the caller may read
-- (row-level security), per day, per gate and in all ($1 first day, then kind, gate, group,
-- project; NULL: any). $6: the caller's scopes (its own, its groups'; NULL for the service
-- role), so that only its rows are read, by the scope index, not everyone's.
SELECT GROUPING(day, kind, gate) AS level, day, kind, gate,
       coalesce(sum(approved), 0)::int AS approved,
       coalesce(sum(rejected), 0)::int AS rejected,
       coalesce(sum(expired), 0)::int AS expired,
       coalesce(sum(superseded), 0)::int AS superseded,
       coalesce(sum(policy_decided), 0)::int AS policy_decided,
       coalesce(sum(recommended), 0)::int AS recommended,
       coalesce(sum(overruled), 0)::int AS overruled,
       coalesce(sum(reminders), 0)::int AS reminders,
       sum(h1)::int AS h1, sum(h2)::int AS h2, sum(h3)::int AS h3, sum(h4)::int AS h4,
       sum(h5)::int AS h5, sum(h6)::int AS h6, sum(h7)::int AS h7, sum(h8)::int AS h8,
       sum(h9)::int AS h9, sum(h10)::int AS h10, sum(h11)::int AS h11, sum(h12)::int AS h12,
       sum(h13)::int AS h13, sum(h14)::int AS h14, sum(h15)::int AS h15, sum(h16)::int AS h16,
       sum(h17)::int AS h17, sum(h18)::int AS h18, sum(h19)::int AS h19, sum(h20)::int AS h20,
       sum(h21)::int AS h21, sum(h22)::int AS h22, sum(h23)::int AS h23, sum(h24)::int AS h24,
       sum(h25)::int AS h25, sum(h26)::int AS h26, sum(h27)::int AS h27, sum(h28)::int AS h28,
       sum(h29)::int AS h29, sum(h30)::int AS h30, sum(h31)::int AS h31, sum(h32)::int AS h32,
       sum(h33)::int AS h33, sum(h34)::int AS h34, sum(h35)::int AS h35, sum(h36)::int AS h36,
       sum(h37)::int AS h37, sum(h38)::int AS h38, sum(h39)::int AS h39, sum(h40)::int AS h40,
       sum(h41)::int AS h41, sum(h42)::int AS h42, sum(h43)::int AS h43, sum(h44)::int AS h44,
       sum(h45)::int AS h45, sum(h46)::int AS h46, sum(h47)::int AS h47, sum(h48)::int AS h48,
       sum(h49)::int AS h49
  FROM decision_rollups
 WHERE day >= $1 AND ($2::text IS NULL OR kind = $2) AND ($3::text IS NULL OR gate = $3)
   AND ($4::uuid IS NULL OR group_id = $4) AND ($5::text IS NULL OR project_id = $5)
   AND ($6::text[] IS NULL OR scope = ANY ($6::text[]))
 GROUP BY GROUPING SETS ((day), (kind, gate), ());

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
SELECT kind, gate, sum(seconds)::float8 AS seconds,
       sum(h1)::int AS h1, sum(h2)::int AS h2, sum(h3)::int AS h3, sum(h4)::int AS h4,
       sum(h5)::int AS h5, sum(h6)::int AS h6, sum(h7)::int AS h7, sum(h8)::int AS h8,
       sum(h9)::int AS h9, sum(h10)::int AS h10, sum(h11)::int AS h11, sum(h12)::int AS h12,
       sum(h13)::int AS h13, sum(h14)::int AS h14, sum(h15)::int AS h15, sum(h16)::int AS h16,
       sum(h17)::int AS h17, sum(h18)::int AS h18, sum(h19)::int AS h19, sum(h20)::int AS h20,
       sum(h21)::int AS h21, sum(h22)::int AS h22, sum(h23)::int AS h23, sum(h24)::int AS h24,
       sum(h25)::int AS h25, sum(h26)::int AS h26, sum(h27)::int AS h27, sum(h28)::int AS h28,
       sum(h29)::int AS h29, sum(h30)::int AS h30, sum(h31)::int AS h31, sum(h32)::int AS h32,
       sum(h33)::int AS h33, sum(h34)::int AS h34, sum(h35)::int AS h35, sum(h36)::int AS h36,
       sum(h37)::int AS h37, sum(h38)::int AS h38, sum(h39)::int AS h39, sum(h40)::int AS h40,
       sum(h41)::int AS h41, sum(h42)::int AS h42, sum(h43)::int AS h43, sum(h44)::int AS h44,
       sum(h45)::int AS h45, sum(h46)::int AS h46, sum(h47)::int AS h47, sum(h48)::int AS h48,
       sum(h49)::int AS h49
  FROM decision_rollups
 GROUP BY kind, gate
 ORDER BY kind, gate;

-- name: insert_policy
-- A new policy at version 1 (its first version is inserted beside it).
INSERT INTO decision_policies (id, name, owner, group_id) VALUES ($1, $2, $3, $4);

-- name: insert_policy_version
-- One version of a policy: never changed once written.
INSERT INTO decision_policy_versions (policy_id, version, kind, checkpoint_name, project_id,
                                      condition, decision, mode, created_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9);

-- name: set_policy_version
-- Moves a policy to its next version; nothing when another change came first.
UPDATE decision_policies SET version = $2, updated_at = now()
 WHERE id = $1 AND version = $2 - 1 AND deleted_at IS NULL
RETURNING id;

-- name: live_policies
-- The live policies the caller may read (row-level security), at their current versions, with
-- their shadow agreement, by name: one ($1), or all of a kind ($2; NULL: any), at most $3.
SELECT p.id, p.name, p.owner, p.group_id, p.version, p.created_at, p.updated_at,
       v.kind, v.checkpoint_name, v.project_id, v.condition, v.decision, v.mode, v.created_by,
       a.compared, a.agreed
  FROM decision_policies p
  JOIN decision_policy_versions v ON v.policy_id = p.id AND v.version = p.version
  LEFT JOIN LATERAL (
      SELECT count(*) AS compared, count(*) FILTER (WHERE e.decision = g.decision) AS agreed
        FROM policy_evaluations e JOIN hitl_requests g ON g.id = e.request_id
       WHERE e.policy_id = p.id AND e.mode = 'shadow' AND e.outcome = 'decide'
         AND g.status IN ('approved', 'rejected') AND g.decision_by NOT LIKE 'policy:%') a ON true
 WHERE p.deleted_at IS NULL AND ($1::uuid IS NULL OR p.id = $1)
   AND ($2::text IS NULL OR v.kind = $2)
 ORDER BY p.name, p.id
 LIMIT $3;

-- name: live_policy_named
-- The live policy of a name in a scope (a group's, or a person's own).
SELECT id FROM decision_policies
 WHERE name = $1 AND deleted_at IS NULL
   AND (($2::uuid IS NULL AND group_id IS NULL AND owner = $3) OR group_id = $2);

-- name: delete_policy
-- A deleted policy applies to no new gate; its versions stay for the gates they judged.
UPDATE decision_policies SET deleted_at = now(), updated_at = now()
 WHERE id = $1 AND deleted_at IS NULL
RETURNING id;

-- name: applicable_policies
-- The policies a run's gate is judged by, at their current versions, in name order: its
-- kind's (for this gate or every gate), of its project or every project, its group's or, for
-- a run without a group... its owner's own; a group run is judged by its group's and its
-- owner's own policies.
SELECT p.id, p.name, p.version, v.condition, v.decision, v.mode
  FROM decision_policies p
  JOIN decision_policy_versions v ON v.policy_id = p.id AND v.version = p.version
 WHERE p.deleted_at IS NULL AND v.kind = $1
   AND (v.checkpoint_name IS NULL OR v.checkpoint_name = $2)
   AND (v.project_id IS NULL OR v.project_id = $5)
   AND ((p.group_id IS NULL AND p.owner = $3) OR p.group_id = $4)
 ORDER BY p.name, p.id;

-- name: policy_run
-- A run as a condition sees it.
SELECT kind, input, owner, group_id, project_id, cost_usd FROM runs WHERE id = $1;

-- name: record_evaluation
-- One policy's verdict on a gate; the activity's last attempt is the one its history holds.
INSERT INTO policy_evaluations (request_id, run_id, policy_id, version, name, mode, outcome,
                                decision, error)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (request_id, policy_id) DO UPDATE
   SET version = EXCLUDED.version, name = EXCLUDED.name, mode = EXCLUDED.mode,
       outcome = EXCLUDED.outcome, decision = EXCLUDED.decision, error = EXCLUDED.error,
       evaluated_at = now();

-- name: past_requests
-- The last requests a policy applies to (its kind, its gate or any, its project or any, its
-- group's runs or its owner's) that the caller may read, newest first, with their runs as a
-- condition sees them (a dry run).
SELECT g.id, g.run_id, g.checkpoint_name, g.options, g.recommended_option, g.context,
       g.status, g.decision, g.decision_by, g.created_at,
       r.kind, r.input, r.owner, r.group_id, r.project_id, r.cost_usd
  FROM hitl_requests g JOIN runs r ON r.id = g.run_id
 WHERE r.kind = $1 AND ($2::text IS NULL OR g.checkpoint_name = $2)
   AND ($4::text IS NULL OR r.project_id = $4)
   AND (($5::uuid IS NULL AND r.owner = $6) OR r.group_id = $5)
   AND r.erased_at IS NULL
 ORDER BY g.created_at DESC, g.id DESC
 LIMIT $3;

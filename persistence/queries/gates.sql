-- name: supersede_pending_gates
-- Opening a request for a checkpoint supersedes any older pending one for the same checkpoint.
UPDATE hitl_requests SET status = 'superseded', updated_at = now()
 WHERE run_id = $1 AND checkpoint_name = $2 AND status = 'pending' AND id <> $3
RETURNING id;

-- name: insert_gate
-- The workflow chooses the id, so a retried open finds its first row.
INSERT INTO hitl_requests (id, run_id, checkpoint_name, phase, title, description, context,
                           options, recommended_option, digest, expiry_policy, default_option,
                           expires_at, decider_roles)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (id) DO NOTHING;

-- name: close_gate
-- Records the outcome of a pending request; a request already closed is left as it is.
UPDATE hitl_requests SET status = $2, decision = $3, feedback = $4, decision_by = $5,
                         decision_at = $6, decision_arguments = $7, updated_at = now()
 WHERE id = $1 AND status = 'pending';

-- name: get_gate
-- One request by id, unless its run is erased (then hidden, as the run is).
SELECT g.* FROM hitl_requests g JOIN runs r ON r.id = g.run_id
 WHERE g.id = $1 AND r.erased_at IS NULL;

-- name: list_run_gates
-- Every request of a run, oldest first.
SELECT * FROM hitl_requests WHERE run_id = $1 ORDER BY created_at, id;

-- name: latest_gate_for_checkpoint
-- The newest request for one checkpoint of a run.
SELECT * FROM hitl_requests WHERE run_id = $1 AND checkpoint_name = $2
 ORDER BY created_at DESC, id DESC LIMIT 1;

-- name: list_inbox
-- Requests the caller may decide (all when owner is NULL): on its own runs, and on its groups'
-- runs where its role is one the request names; never on erased runs; by status, newest first.
SELECT g.* FROM hitl_requests g JOIN runs r ON r.id = g.run_id
  LEFT JOIN group_members m ON m.group_id = r.group_id AND m.user_name = $1
 WHERE r.erased_at IS NULL
   AND ($1::text IS NULL OR r.owner = $1 OR m.role = ANY (g.decider_roles))
   AND ($2::text IS NULL OR g.status = $2)
 ORDER BY g.created_at DESC, g.id DESC
 LIMIT $3;

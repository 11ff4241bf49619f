-- name: supersede_pending_gates
-- Opening a request for a checkpoint supersedes any older pending one for the same checkpoint.
UPDATE hitl_requests SET status = 'superseded', updated_at = now()
 WHERE run_id = $1 AND checkpoint_name = $2 AND status = 'pending' AND id <> $3
RETURNING id;

-- name: insert_gate
-- The workflow chooses the id, so a retried open finds its first row.
INSERT INTO hitl_requests (id, run_id, checkpoint_name, phase, title, description, context,
                           options, recommended_option, digest, expiry_policy, default_option,
                           expires_at, decider_roles, decider_users, quorum, answer_schema,
                           answer_initial)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
ON CONFLICT (id) DO NOTHING;

-- name: close_gate
-- Records the outcome of a pending request; a request already closed is left as it is.
-- Answers the request as this close left it, unless its run is erased (as get_gate), so that
-- its decision's notifications need not read it again; a request closed before (a retried
-- write) answers nothing, and is read (gates.get_gate) in a statement of its own.
WITH closed AS (
    UPDATE hitl_requests SET status = $2, decision = $3, feedback = $4, decision_by = $5,
                             decision_at = $6, answer = $7, updated_at = now()
     WHERE id = $1 AND status = 'pending'
    RETURNING *)
SELECT c.* FROM closed c JOIN runs r ON r.id = c.run_id WHERE r.erased_at IS NULL;

-- name: insert_vote
-- One vote per person per request (a delegated vote is the delegator's): a retry finds it.
-- A request still pending is touched so that inbox streams hear of the vote (the deciding
-- vote's request has just been closed, which they hear of anyway).
WITH vote AS (
    INSERT INTO gate_votes (request_id, voter, on_behalf_of, option, feedback, answer, digest,
                            voted_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
    ON CONFLICT (request_id, on_behalf_of) DO NOTHING
    RETURNING request_id)
UPDATE hitl_requests SET updated_at = now()
 WHERE id IN (SELECT request_id FROM vote) AND status = 'pending';

-- name: insert_delegation
WITH handed AS (
    INSERT INTO gate_delegations (request_id, from_user, to_user, delegated_at)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (request_id, from_user) DO NOTHING
    RETURNING request_id)
UPDATE hitl_requests SET updated_at = now() WHERE id IN (SELECT request_id FROM handed);

-- name: record_reminder
-- Counts a request's reminders; a retried one (same number) changes nothing.
UPDATE hitl_requests SET reminders_sent = $2, updated_at = now()
 WHERE id = $1 AND status = 'pending' AND reminders_sent < $2;

-- name: record_escalation
-- Widens who may decide a waiting request (the change wakes the new deciders' inboxes).
UPDATE hitl_requests SET decider_roles = $2, escalated_at = now(), updated_at = now()
 WHERE id = $1 AND status = 'pending' AND escalated_at IS NULL;

-- name: list_gate_audits
-- Each request's votes (in the order they were cast) and delegations, in one round trip.
SELECT r.id AS request_id,
       COALESCE((SELECT jsonb_agg(to_jsonb(v) ORDER BY v.voted_at, v.on_behalf_of)
                   FROM gate_votes v WHERE v.request_id = r.id), '[]') AS votes,
       COALESCE((SELECT jsonb_agg(to_jsonb(d) ORDER BY d.delegated_at, d.from_user)
                   FROM gate_delegations d WHERE d.request_id = r.id), '[]') AS delegations
  FROM unnest($1::uuid[]) AS r (id);

-- name: delegated_to
-- Whose votes on a request were handed to a person (directly).
SELECT from_user FROM gate_delegations WHERE request_id = $1 AND to_user = $2;

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
-- Requests the caller may decide (all when owner is NULL): on its own runs, on its groups'
-- runs where its role is one the request names, where it is named, or holds a delegated
-- vote; not those it has voted on already; never on erased runs; by status, newest first.
SELECT g.* FROM hitl_requests g JOIN runs r ON r.id = g.run_id
  LEFT JOIN group_members m ON m.group_id = r.group_id AND m.user_name = $1
 WHERE r.erased_at IS NULL
   AND ($1::text IS NULL OR r.owner = $1 OR m.role = ANY (g.decider_roles)
        OR $1 = ANY (g.decider_users)
        OR EXISTS (SELECT 1 FROM gate_delegations d
                    WHERE d.request_id = g.id AND d.to_user = $1))
   AND ($1::text IS NULL OR g.status <> 'pending' OR NOT EXISTS (
        SELECT 1 FROM gate_votes v WHERE v.request_id = g.id AND v.voter = $1))
   AND ($2::text IS NULL OR g.status = $2)
 ORDER BY g.created_at DESC, g.id DESC
 LIMIT $3;

-- name: insert_run
-- Creates a run; returns nothing when the owner's idempotency key is taken (find_run_by_key)
-- or the group's run of that kind and name is in progress (find_named_run_in_progress). $11 is
-- where a forked run came from (migration 058), null for any other.
INSERT INTO runs (id, kind, owner, group_id, workflow_id, idempotency_key, input, project_id,
                  gate_policies, name, forked_from)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: find_run_by_key
-- The run an owner already created with this idempotency key.
SELECT * FROM runs WHERE owner = $1 AND idempotency_key = $2;

-- name: find_named_run_in_progress
-- The group's run of this kind and name that has not ended (migration 055's index: one).
SELECT * FROM runs
 WHERE group_id = $1 AND kind = $2 AND name = $3 AND erased_at IS NULL
   AND status NOT IN ('completed', 'failed', 'canceled');

-- name: get_run
-- One run by id, unless erased (an erased run is hidden from every read).
SELECT * FROM runs WHERE id = $1 AND erased_at IS NULL;

-- name: get_run_or_hidden
-- One run by id, visible or hidden by a person (who may restore it); not one an erasure hid.
SELECT * FROM runs WHERE id = $1 AND (erased_at IS NULL OR hidden_by IS NOT NULL);

-- name: hide_run
-- Hides a run at the request of $2 (a soft delete: see migration 051); hiding it again
-- changes nothing. Returns when it was hidden.
UPDATE runs SET erased_at = COALESCE(erased_at, now()), hidden_by = COALESCE(hidden_by, $2)
 WHERE id = $1 AND (erased_at IS NULL OR hidden_by IS NOT NULL)
RETURNING erased_at;

-- name: restore_run
-- Shows a run a person hid again, if it was hidden less than $2 seconds ago (after that the
-- retention sweep may be deleting it). Returns the run when restored.
UPDATE runs SET erased_at = NULL, hidden_by = NULL
 WHERE id = $1 AND hidden_by IS NOT NULL AND erased_at > now() - make_interval(secs => $2)
RETURNING *;

-- name: run_end
-- How a run ended, if it has (erased or not: the workflow must end as it did).
SELECT status, result, error_message, stop_reason FROM runs
 WHERE id = $1 AND status IN ('completed', 'failed', 'canceled');

-- name: list_runs
-- A page of runs, newest first; NULL filters match everything; ($6, $7) is the keyset cursor;
-- $8 is a project; $9 searches the id, phase and input case-insensitively; $10 is a group;
-- $11 keeps only runs `running` and not updated for that many seconds.
-- $1 sees the runs it owns and those of its groups; erased runs nobody sees, but with $12 the
-- runs $1 owns and hid (and may restore) are listed instead of visible ones. The kinds' own
-- filters (`RunKind.run_filters`: `AND id IN (<the kind's query>)`, $13 on) take the place
-- of KIND_FILTERS (persistence.runs list_runs).
SELECT * FROM runs
 WHERE (CASE WHEN $12 THEN hidden_by IS NOT NULL AND erased_at IS NOT NULL
                           AND ($1::text IS NULL OR owner = $1)
             ELSE erased_at IS NULL END)
   AND ($1::text IS NULL OR owner = $1
        OR group_id IN (SELECT group_id FROM group_members WHERE user_name = $1))
   AND ($2::text IS NULL OR kind = $2)
   AND ($3::text IS NULL OR status = $3)
   AND ($4::boolean IS NULL OR (hitl_state IS NOT NULL) = $4)
   AND ($6::timestamptz IS NULL OR (created_at, id) < ($6, $7::uuid))
   AND ($8::text IS NULL OR project_id = $8)
   AND ($9::text IS NULL OR strpos(lower(id::text || ' ' || coalesce(phase_name, '') || ' '
                                        || input::text), lower($9)) > 0)
   AND ($10::uuid IS NULL OR group_id = $10)
   AND ($11::int IS NULL OR (status = 'running'
                             AND updated_at < now() - make_interval(secs => $11)))
   /* KIND_FILTERS */
 ORDER BY created_at DESC, id DESC
 LIMIT $5;

-- name: list_tasks
-- A page of the runs $1 sees (every run for NULL) as A2A tasks, by status timestamp (the
-- `updated_at` a task shows), most recently updated first; $2 is a status (NULL: any);
-- ($4, $5) is the keyset cursor, the last row's (updated_at, id), so a page boundary holds
-- however many runs are listed; a run updated while its list is paged moves to the front.
SELECT * FROM runs
 WHERE erased_at IS NULL
   AND ($1::text IS NULL OR owner = $1
        OR group_id IN (SELECT group_id FROM group_members WHERE user_name = $1))
   AND ($2::text IS NULL OR status = $2)
   AND ($4::timestamptz IS NULL OR (updated_at, id) < ($4, $5::uuid))
 ORDER BY updated_at DESC, id DESC
 LIMIT $3;

-- name: apply_progress_write
-- A write's run state, snapshots and events in one statement (migration 028), the run's row
-- updated once (091); each key's seq.
-- $2 is the JSON text of the write's progress parts (persistence.writes), parsed once here.
SELECT out_key, out_seq FROM apply_progress_write($1, $2::text::jsonb);

-- name: mark_run_failed_to_start
-- The API could not start the workflow: the run will never move, so say so.
UPDATE runs SET status = 'failed', error_message = $2, stop_reason = 'failed_to_start',
                updated_at = now(), completed_at = now()
 WHERE id = $1 AND status = 'pending';


-- name: count_tasks
-- How many runs $1 sees (every run for NULL) are tasks in state $2 (`submitted`, `working`,
-- `input_required`, `completed`, `failed`, `rejected`, `canceled`; NULL: any): an A2A
-- ListTasks' totalSize, counted here instead of by reading the runs. A paused run needs input
-- when it waits at a gate, or is of one of the kinds $3 whose paused runs wait for a message.
SELECT count(*) FROM runs
 WHERE erased_at IS NULL
   AND ($1::text IS NULL OR owner = $1
        OR group_id IN (SELECT group_id FROM group_members WHERE user_name = $1))
   AND CASE $2::text
         WHEN 'submitted' THEN status = 'pending'
         WHEN 'completed' THEN status = 'completed'
         WHEN 'canceled' THEN status = 'canceled'
         WHEN 'rejected' THEN status = 'failed' AND stop_reason IS NOT DISTINCT FROM 'rejected'
         WHEN 'failed' THEN status = 'failed' AND stop_reason IS DISTINCT FROM 'rejected'
         WHEN 'input_required' THEN status = 'paused'
              AND (hitl_state IS NOT NULL OR kind = ANY ($3::text[]))
         WHEN 'working' THEN status = 'running'
              OR (status = 'paused' AND hitl_state IS NULL AND kind <> ALL ($3::text[]))
         ELSE true END;

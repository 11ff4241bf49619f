-- name: insert_group
-- A new group; its creator becomes its first owner in the same transaction (see groups.py).
INSERT INTO groups (id, name, created_by) VALUES ($1, $2, $3) RETURNING *;

-- name: get_group
-- One group by id.
SELECT * FROM groups WHERE id = $1;

-- name: lock_group
-- Serializes member changes of one group (so two of them cannot both remove "the other" owner).
SELECT id FROM groups WHERE id = $1 FOR UPDATE;

-- name: list_member_groups
-- The groups a user belongs to (every group when the user is NULL), with the user's role.
SELECT g.*, m.role FROM groups g
  LEFT JOIN group_members m ON m.group_id = g.id AND m.user_name = $1
 WHERE $1::text IS NULL OR m.user_name IS NOT NULL
 ORDER BY g.created_at, g.id;

-- name: list_group_members
-- Every member of a group, oldest first.
SELECT * FROM group_members WHERE group_id = $1 ORDER BY created_at, user_name;

-- name: member_role
-- A user's role in a group, or no row.
SELECT role FROM group_members WHERE group_id = $1 AND user_name = $2;

-- name: member_roles
-- Every group a user belongs to, with the role: what an inbox stream hands changes by.
SELECT group_id, role FROM group_members WHERE user_name = $1;

-- name: upsert_member
-- Adds a member or changes its role; `inserted` tells which.
INSERT INTO group_members (group_id, user_name, role, added_by) VALUES ($1, $2, $3, $4)
ON CONFLICT (group_id, user_name)
DO UPDATE SET role = EXCLUDED.role, updated_at = now()
RETURNING *, (xmax = 0) AS inserted;

-- name: delete_member
-- Removes a member; returns the row removed, if any.
DELETE FROM group_members WHERE group_id = $1 AND user_name = $2 RETURNING *;

-- name: count_owners
-- How many owners a group has (a group never loses its last one).
SELECT count(*) FROM group_members WHERE group_id = $1 AND role = 'owner';

-- name: list_group_runs
-- A group's runs, newest first, optionally by status: seed 003's "where were we" query. An
-- erased user's runs are hidden here as everywhere.
SELECT * FROM runs
 WHERE group_id = $1 AND ($2::text IS NULL OR status = $2) AND erased_at IS NULL
 ORDER BY created_at DESC, id DESC
 LIMIT $3;

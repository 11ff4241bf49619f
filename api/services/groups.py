"""Groups of people around runs: create, list, members, and the group's runs (seed 003)."""

from __future__ import annotations

import uuid
from uuid import UUID

import asyncpg

from waystation.api.auth import User
from waystation.api.errors import ApiError
from waystation.api.group_schemas import (
    GroupCreate,
    GroupDetail,
    GroupList,
    GroupRunList,
    GroupRunQuery,
    GroupRunView,
    GroupView,
    MemberPut,
    MemberView,
)
from waystation.api.services.access import require_group_owner, require_member
from waystation.persistence import groups as groups_repo


async def create_group(conn: asyncpg.Connection, user: User, body: GroupCreate) -> GroupView:
    """A new group; the caller is its first owner."""
    group = await groups_repo.create_group(conn, group_id=uuid.uuid4(), name=body.name,
                                           creator=user.name)
    return GroupView.of(group)


async def list_groups(conn: asyncpg.Connection, user: User) -> GroupList:
    """The caller's groups with its role in each (every group for the service role)."""
    groups = await groups_repo.list_groups(conn, user.owner_filter)
    return GroupList(groups=[GroupView.of(g) for g in groups])


async def get_group(conn: asyncpg.Connection, user: User, group_id: UUID) -> GroupDetail:
    """One of the caller's groups, with its members; 404 for any other."""
    role = await require_member(conn, user, group_id)
    group = await groups_repo.get_group(conn, group_id)
    assert group is not None, "require_member found it"
    members = await groups_repo.list_members(conn, group_id)
    return GroupDetail(**GroupView.of(group).model_dump(exclude={"role"}), role=role,
                       members=[MemberView.of(m) for m in members])


async def put_member(conn: asyncpg.Connection, user: User, group_id: UUID,
                     body: MemberPut) -> tuple[MemberView, bool]:
    """Add a member with a role, or change a member's role (group owners only): the member,
    and whether it was added now; 409 for the group's last owner made something else."""
    await require_group_owner(conn, user, group_id, f"change members of group {group_id}")
    try:
        member, added = await groups_repo.put_member(conn, group_id=group_id, user=body.user,
                                                     role=body.role, added_by=user.name)
    except groups_repo.LastOwner as error:
        raise ApiError(409, "last_owner", str(error)) from error
    return MemberView.of(member), added


async def remove_member(conn: asyncpg.Connection, user: User, group_id: UUID,
                        member: str) -> None:
    """Remove a member; owners remove anyone, any member removes itself; 409 for the last
    owner, 404 for someone who is not a member."""
    if member != user.name:
        await require_group_owner(conn, user, group_id,
                                  f"remove other members of group {group_id}")
    else:
        await require_member(conn, user, group_id)
    try:
        removed = await groups_repo.remove_member(conn, group_id, member)
    except groups_repo.LastOwner as error:
        raise ApiError(409, "last_owner", str(error)) from error
    if not removed:
        raise ApiError(404, "member_not_found", f"{member!r} is not a member of group {group_id}")


async def group_runs(conn: asyncpg.Connection, user: User, group_id: UUID,
                     query: GroupRunQuery) -> GroupRunList:
    """The group's runs, newest first, each with where it stands; members only."""
    await require_member(conn, user, group_id)
    runs = await groups_repo.list_group_runs(conn, group_id, status=query.status,
                                             limit=query.limit)
    return GroupRunList(group_id=group_id, runs=[GroupRunView.of(r) for r in runs])

"""Groups of people around runs: create, list, members, and the group's runs (seed 003)."""

from __future__ import annotations

import uuid
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Path, Query, Response

from api.auth import User
from api.deps import Conn, CurrentUser
from api.errors import ERROR_RESPONSES, ApiError
from api.group_schemas import (
    GroupCreate,
    GroupDetail,
    GroupList,
    GroupRunList,
    GroupRunView,
    GroupView,
    MemberPut,
    MemberView,
)
from api.services.access import require_member
from persistence import groups as groups_repo
from persistence.models import RunStatus

router = APIRouter(prefix="/groups", tags=["groups"])

MemberName = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[^\x00]+$")]


@router.post("", status_code=201, response_model=GroupView)
async def create_group(body: GroupCreate, user: CurrentUser, conn: Conn) -> GroupView:
    """A new group; the caller is its first owner."""
    group = await groups_repo.create_group(conn, group_id=uuid.uuid4(), name=body.name,
                                           creator=user.name)
    return GroupView.of(group)


@router.get("", response_model=GroupList)
async def list_groups(user: CurrentUser, conn: Conn) -> GroupList:
    """The caller's groups with its role in each (every group for the service role)."""
    groups = await groups_repo.list_groups(conn, user.owner_filter)
    return GroupList(groups=[GroupView.of(g) for g in groups])


@router.get("/{group_id}", response_model=GroupDetail)
async def get_group(group_id: UUID, user: CurrentUser, conn: Conn) -> GroupDetail:
    """One of the caller's groups, with its members."""
    role = await require_member(conn, user, group_id)
    group = await groups_repo.get_group(conn, group_id)
    assert group is not None, "require_member found it"
    members = await groups_repo.list_members(conn, group_id)
    return GroupDetail(**GroupView.of(group).model_dump(exclude={"role"}), role=role,
                       members=[MemberView.of(m) for m in members])


@router.post("/{group_id}/members", status_code=201, response_model=MemberView,
             responses={200: {"model": MemberView, "description": "The member's role changed"}})
async def put_member(group_id: UUID, body: MemberPut, user: CurrentUser, conn: Conn,
                     response: Response) -> MemberView:
    """Add a member with a role (201), or change a member's role (200); group owners only."""
    await _require_owner(conn, user, group_id, "change members")
    try:
        member, added = await groups_repo.put_member(conn, group_id=group_id, user=body.user,
                                                     role=body.role, added_by=user.name)
    except groups_repo.LastOwner as error:
        raise ApiError(409, "last_owner", str(error)) from error
    if not added:
        response.status_code = 200
    return MemberView.of(member)


@router.delete("/{group_id}/members/{member}", status_code=204, response_class=Response,
               responses={403: ERROR_RESPONSES[403], 409: ERROR_RESPONSES[409]})
async def remove_member(group_id: UUID, member: MemberName, user: CurrentUser,
                        conn: Conn) -> Response:
    """Remove a member; group owners remove anyone, any member removes itself."""
    if member != user.name:
        await _require_owner(conn, user, group_id, "remove other members")
    else:
        await require_member(conn, user, group_id)
    try:
        removed = await groups_repo.remove_member(conn, group_id, member)
    except groups_repo.LastOwner as error:
        raise ApiError(409, "last_owner", str(error)) from error
    if not removed:
        raise ApiError(404, "member_not_found", f"{member!r} is not a member of group {group_id}")
    return Response(status_code=204)


@router.get("/{group_id}/runs", response_model=GroupRunList)
async def group_runs(group_id: UUID, user: CurrentUser, conn: Conn,
                     status: RunStatus | None = None,
                     limit: Annotated[int, Query(ge=1, le=500)] = 100) -> GroupRunList:
    """The group's runs, newest first, each with where it stands: any member picks up from
    there."""
    await require_member(conn, user, group_id)
    runs = await groups_repo.list_group_runs(conn, group_id, status=status, limit=limit)
    return GroupRunList(group_id=group_id, runs=[GroupRunView.of(r) for r in runs])


async def _require_owner(conn: Conn, user: User, group_id: UUID, action: str) -> None:
    role = await require_member(conn, user, group_id)
    if not user.is_service and role != groups_repo.OWNER:
        raise ApiError(403, "not_allowed", f"role {role!r} may not {action} of group "
                                           f"{group_id}: it takes role 'owner'",
                       details=[{"role": role, "allowed_roles": [groups_repo.OWNER]}])

"""Groups of people around runs: create, list, members, and the group's runs (seed 003)."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Path, Query, Response

from waystation.api.deps import Conn, CurrentUser
from waystation.api.errors import ERROR_RESPONSES
from waystation.api.group_schemas import (
    GroupCreate,
    GroupDetail,
    GroupList,
    GroupRunList,
    GroupRunQuery,
    GroupView,
    MemberPut,
    MemberView,
)
from waystation.api.services import groups

router = APIRouter(prefix="/groups", tags=["groups"])

MemberName = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[^\x00]+$")]


@router.post("", status_code=201, response_model=GroupView)
async def create_group(body: GroupCreate, user: CurrentUser, conn: Conn) -> GroupView:
    """A new group; the caller is its first owner."""
    return await groups.create_group(conn, user, body)


@router.get("", response_model=GroupList)
async def list_groups(user: CurrentUser, conn: Conn) -> GroupList:
    """The caller's groups with its role in each (every group for the service role)."""
    return await groups.list_groups(conn, user)


@router.get("/{group_id}", response_model=GroupDetail)
async def get_group(group_id: UUID, user: CurrentUser, conn: Conn) -> GroupDetail:
    """One of the caller's groups, with its members."""
    return await groups.get_group(conn, user, group_id)


@router.post("/{group_id}/members", status_code=201, response_model=MemberView,
             responses={200: {"model": MemberView, "description": "The member's role changed"}})
async def put_member(group_id: UUID, body: MemberPut, user: CurrentUser, conn: Conn,
                     response: Response) -> MemberView:
    """Add a member with a role (201), or change a member's role (200); group owners only."""
    member, added = await groups.put_member(conn, user, group_id, body)
    if not added:
        response.status_code = 200
    return member


@router.delete("/{group_id}/members/{member}", status_code=204, response_class=Response,
               responses={403: ERROR_RESPONSES[403], 409: ERROR_RESPONSES[409]})
async def remove_member(group_id: UUID, member: MemberName, user: CurrentUser,
                        conn: Conn) -> Response:
    """Remove a member; group owners remove anyone, any member removes itself."""
    await groups.remove_member(conn, user, group_id, member)
    return Response(status_code=204)


@router.get("/{group_id}/runs", response_model=GroupRunList)
async def group_runs(group_id: UUID, user: CurrentUser, conn: Conn,
                     query: Annotated[GroupRunQuery, Query()]) -> GroupRunList:
    """The group's runs, newest first, each with where it stands: any member picks up from
    there."""
    return await groups.group_runs(conn, user, group_id, query)

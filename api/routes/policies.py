"""Decision policies: `/policies` (create, list, read, change, delete) and their dry run."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, Response

from waystation.api.deps import Conn, CurrentUser, RegistryDep
from waystation.api.policy_schemas import (
    DryRunRequest,
    DryRunView,
    PolicyChange,
    PolicyCreate,
    PolicyList,
    PolicyQuery,
    PolicyView,
)
from waystation.api.services import policies

router = APIRouter(prefix="/policies", tags=["policies"])


@router.post("", status_code=201, response_model=PolicyView)
async def create_policy(body: PolicyCreate, user: CurrentUser, conn: Conn,
                        registry: RegistryDep) -> PolicyView:
    """A new policy (201); the same one sent again answers as the first."""
    view, _ = await policies.create(conn, user, registry, body)
    return view


@router.get("", response_model=PolicyList)
async def list_policies(conn: Conn, query: Annotated[PolicyQuery, Query()],
                        user: CurrentUser) -> PolicyList:
    """The caller's own policies and its groups'."""
    return await policies.list_policies(conn, query)


@router.get("/{policy_id}", response_model=PolicyView)
async def read_policy(policy_id: UUID, conn: Conn, user: CurrentUser) -> PolicyView:
    """A policy at its current version, with its shadow agreement."""
    return await policies.read(conn, policy_id)


@router.put("/{policy_id}", response_model=PolicyView)
async def change_policy(policy_id: UUID, body: PolicyChange, user: CurrentUser, conn: Conn,
                        registry: RegistryDep) -> PolicyView:
    """The policy's next version."""
    return await policies.change(conn, user, registry, policy_id, body)


@router.delete("/{policy_id}", status_code=204, response_class=Response)
async def delete_policy(policy_id: UUID, user: CurrentUser, conn: Conn) -> Response:
    """No new gate is judged by it."""
    await policies.delete(conn, user, policy_id)
    return Response(status_code=204)


@router.post("/{policy_id}/dry-run", response_model=DryRunView)
async def dry_run(policy_id: UUID, conn: Conn, user: CurrentUser,
                  body: DryRunRequest | None = None) -> DryRunView:
    """What it would have decided on the latest requests of its gate. Writes nothing."""
    return await policies.dry_run(conn, policy_id, body or DryRunRequest())

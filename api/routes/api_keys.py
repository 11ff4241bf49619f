"""API keys: make one (shown once), list them, revoke one."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter, Response

from waystation.api.deps import Conn, CurrentUser, SettingsDep
from waystation.api.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyList
from waystation.api.services import api_keys

router = APIRouter(prefix="/api-keys", tags=["people"])


@router.post("", status_code=201, response_model=ApiKeyCreated)
async def create_api_key(body: ApiKeyCreate, user: CurrentUser, conn: Conn,
                         settings: SettingsDep) -> ApiKeyCreated:
    """A key acting as the caller, or (with `group_id`, group owners only) as its own member
    of the group with `role`; the key is shown only here."""
    return await api_keys.create_api_key(conn, user, body, settings=settings)


@router.get("", response_model=ApiKeyList)
async def list_api_keys(user: CurrentUser, conn: Conn) -> ApiKeyList:
    """The keys the caller made (every key for the service role), revoked ones included."""
    return await api_keys.list_api_keys(conn, user)


@router.delete("/{key_id}", status_code=204, response_class=Response)
async def revoke_api_key(key_id: UUID, user: CurrentUser, conn: Conn) -> Response:
    """Revoke a key at once; a group key also leaves its group."""
    await api_keys.revoke_api_key(conn, user, key_id)
    return Response(status_code=204)

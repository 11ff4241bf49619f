"""API keys: make one (shown once), list them, revoke one."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter, Response

from api.api_keys import new_key, require_person
from api.deps import Conn, CurrentUser, SettingsDep
from api.errors import ApiError
from api.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyList, ApiKeyView
from api.services.access import require_member
from persistence import api_keys as keys_repo
from persistence.groups import OWNER

router = APIRouter(prefix="/api-keys", tags=["people"])


@router.post("", status_code=201, response_model=ApiKeyCreated)
async def create_api_key(body: ApiKeyCreate, user: CurrentUser, conn: Conn,
                         settings: SettingsDep) -> ApiKeyCreated:
    """A key acting as the caller, or (with `group_id`, group owners only) as its own member
    of the group with `role`; the key is shown only here."""
    require_person(user)
    if body.group_id is not None:
        role = await require_member(conn, user, body.group_id)
        if not user.is_service and role != OWNER:
            raise ApiError(403, "not_allowed", f"role {role!r} may not make keys for group "
                                               f"{body.group_id}: it takes role 'owner'",
                           details=[{"role": role, "allowed_roles": [OWNER]}])
    key_id, key, hashed = new_key()
    try:
        row = await keys_repo.create_api_key(conn, key_id=key_id, name=body.name,
                                             owner=user.name, group_id=body.group_id,
                                             role=body.role, secret_hash=hashed,
                                             max_live_keys=settings.max_api_keys_per_user)
    except keys_repo.TooManyKeys as error:
        raise ApiError(409, "too_many_api_keys", str(error)) from error
    return ApiKeyCreated(**ApiKeyView.of(row).model_dump(), key=key)


@router.get("", response_model=ApiKeyList)
async def list_api_keys(user: CurrentUser, conn: Conn) -> ApiKeyList:
    """The keys the caller made (every key for the service role), revoked ones included."""
    return ApiKeyList(api_keys=[ApiKeyView.of(k) for k in
                                await keys_repo.list_api_keys(conn, user.owner_filter)])


@router.delete("/{key_id}", status_code=204, response_class=Response)
async def revoke_api_key(key_id: UUID, user: CurrentUser, conn: Conn) -> Response:
    """Revoke a key at once; a group key also leaves its group."""
    if not await keys_repo.revoke_api_key(conn, key_id, user.owner_filter):
        raise ApiError(404, "api_key_not_found", f"API key {key_id} not found")
    return Response(status_code=204)

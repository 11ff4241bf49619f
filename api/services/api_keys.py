"""API keys: make one (shown once), list them, revoke one (the keys themselves: api/api_keys.py)."""

from __future__ import annotations

from uuid import UUID

import asyncpg

from waystation.api.api_keys import new_key, require_person
from waystation.api.auth import User
from waystation.api.errors import ApiError
from waystation.api.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyList, ApiKeyView
from waystation.api.services.access import require_group_owner
from waystation.persistence import api_keys as keys_repo
from waystation.settings import Settings


async def create_api_key(conn: asyncpg.Connection, user: User, body: ApiKeyCreate, *,
                         settings: Settings) -> ApiKeyCreated:
    """A key acting as the caller, or (with `group_id`, group owners only) as its own member
    of the group with `role`; 403 for a caller signed in with a key, 409 past the caller's
    limit of live keys."""
    require_person(user)
    if body.group_id is not None:
        await require_group_owner(conn, user, body.group_id,
                                  f"make keys for group {body.group_id}")
    key_id, key, hashed = new_key()
    try:
        row = await keys_repo.create_api_key(conn, key_id=key_id, name=body.name,
                                             owner=user.name, group_id=body.group_id,
                                             role=body.role, secret_hash=hashed,
                                             max_live_keys=settings.max_api_keys_per_user)
    except keys_repo.TooManyKeys as error:
        raise ApiError(409, "too_many_api_keys", str(error)) from error
    return ApiKeyCreated(**ApiKeyView.of(row).model_dump(), key=key)


async def list_api_keys(conn: asyncpg.Connection, user: User) -> ApiKeyList:
    """The keys the caller made (every key for the service role), revoked ones included."""
    return ApiKeyList(api_keys=[ApiKeyView.of(k) for k in
                                await keys_repo.list_api_keys(conn, user.owner_filter)])


async def revoke_api_key(conn: asyncpg.Connection, user: User, key_id: UUID) -> None:
    """Revoke one of the caller's keys at once (a group key also leaves its group); 404 for
    any other."""
    if not await keys_repo.revoke_api_key(conn, key_id, user.owner_filter):
        raise ApiError(404, "api_key_not_found", f"API key {key_id} not found")

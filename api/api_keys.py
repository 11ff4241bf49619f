"""API keys for services: `wsk_<key id>_<secret>`, checked against the stored hash."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from uuid import UUID

import asyncpg

from waystation.api.auth import User
from waystation.api.errors import ApiError
from waystation.persistence import api_keys as keys_repo

KEY_PREFIX = "wsk_"


def is_api_key(token: str) -> bool:
    return token.startswith(KEY_PREFIX)


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_key() -> tuple[UUID, str, str]:
    """(key id, the key to show once, the hash to store)."""
    key_id, secret = uuid.uuid4(), secrets.token_urlsafe(32)
    return key_id, f"{KEY_PREFIX}{key_id.hex}_{secret}", secret_hash(secret)


def api_key_id(token: str) -> UUID | None:
    """The id an API key names (not yet checked: see `authenticate_api_key`)."""
    head = token.removeprefix(KEY_PREFIX).partition("_")[0]
    try:
        return UUID(hex=head) if len(head) == 32 else None
    except ValueError:
        return None


async def authenticate_api_key(conn: asyncpg.Connection, token: str) -> User:
    """The principal of a live key; an unknown, revoked or altered key is a 401."""
    key_id, secret = api_key_id(token), token.removeprefix(KEY_PREFIX).partition("_")[2]
    key = await keys_repo.live_api_key(conn, key_id) if key_id and secret else None
    if key is None or not hmac.compare_digest(key.secret_hash, secret_hash(secret)):
        raise ApiError(401, "invalid_token", "unknown or revoked API key")
    return User(name=key.principal, via="api_key", maker=key.owner)


def require_person(user: User) -> None:
    """403 for a caller signed in with an API key: keys are made by people, so that a leaked
    key cannot mint others that outlive its revocation."""
    if user.via == "api_key":
        raise ApiError(403, "not_allowed", "an API key cannot make API keys: keys are made "
                                           "with a person's sign-in (a bearer token or a "
                                           "console session)")

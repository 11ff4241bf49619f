"""Bearer JWT authentication (HS256 with the configured secret).

`sub` is the user; role `service` may read and decide every run. Authorization of a run is
decided here: `can_access` (who reads it) and `may_decide` (who answers its gates). A run's
owner and every member of its group (seed 003) read it; the owner and the members whose group
role a gate names decide it.
"""

from __future__ import annotations

import time
from typing import Literal

import jwt
from pydantic import BaseModel

from api.errors import ApiError
from persistence.models import RunRow

ALGORITHM = "HS256"
Role = Literal["user", "service"]


class User(BaseModel):
    name: str
    role: Role = "user"

    @property
    def is_service(self) -> bool:
        return self.role == "service"

    @property
    def owner_filter(self) -> str | None:
        """The owner to filter lists by; None (everything) for the service role."""
        return None if self.is_service else self.name


def issue_token(secret: str, user: str, role: Role = "user",
                ttl_seconds: int = 30 * 24 * 3600) -> str:
    now = int(time.time())
    claims = {"sub": user, "role": role, "iat": now, "exp": now + ttl_seconds}
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


def authenticate(secret: str, authorization: str | None) -> User:
    if not authorization:
        raise ApiError(401, "unauthenticated", "missing bearer token")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "unauthenticated", "authorization must be 'Bearer <token>'")
    try:
        # Pinning the algorithm refuses alg=none and any algorithm confusion.
        claims = jwt.decode(token.strip(), secret, algorithms=[ALGORITHM],
                            options={"require": ["sub", "exp"]})
    except jwt.ExpiredSignatureError as error:
        raise ApiError(401, "token_expired", "token has expired") from error
    except jwt.InvalidTokenError as error:
        raise ApiError(401, "invalid_token", f"invalid token: {error}") from error
    sub, role = claims.get("sub"), claims.get("role", "user")
    if not isinstance(sub, str) or not sub or len(sub) > 200:
        raise ApiError(401, "invalid_token", "invalid token: 'sub' must be a non-empty string")
    if role not in ("user", "service"):
        raise ApiError(401, "invalid_token", f"invalid token: unknown role {role!r}")
    return User(name=sub, role=role)


def can_access(user: User, run: RunRow, group_role: str | None = None) -> bool:
    """`group_role` is the user's role in the run's group, None when not a member."""
    return user.is_service or run.owner == user.name or group_role is not None


def may_decide(user: User, run: RunRow, group_role: str | None, decider_roles: list[str],
               action: str) -> None:
    """Raises 403 naming the rule unless the user may `action` (decide a gate, cancel, ...):
    the run's owner, the service role, or a group member whose role is in `decider_roles`."""
    if user.is_service or run.owner == user.name or group_role in decider_roles:
        return
    raise ApiError(403, "not_allowed",
                   f"role {group_role!r} may not {action}: it takes the run's owner or a group "
                   f"member with role {' or '.join(decider_roles)}",
                   details=[{"role": group_role, "allowed_roles": decider_roles}])

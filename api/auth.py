"""Authentication: a bearer JWT (HS256 with the configured secret) or a console session cookie.

`sub` is the user; role `service` may read and decide every run. Authorization of a run is
decided here: `can_access` (who reads it) and `may_decide` (who answers its gates). A run's
owner and every member of its group (seed 003) read it; the owner and the members whose group
role a gate names decide it.

Browsers cannot put an `Authorization` header on an EventSource, so the web console signs in
once (a one-time code exchanged for a session) and then sends an HttpOnly cookie. A cookie is
sent by the browser on its own, so every changing request authenticated by it must also carry
the session's CSRF token in `X-CSRF-Token`, which another site's page cannot read.
"""

from __future__ import annotations

import hmac
import secrets
import time
from typing import Any, Literal

import asyncpg
import jwt
from pydantic import BaseModel

from waystation.api.errors import ApiError
from waystation.persistence import console_sessions, token_cutoffs
from waystation.persistence.models import RunRow

SESSION_COOKIE = "waystation_session"
CSRF_HEADER = "X-CSRF-Token"
# Methods that change nothing; every other method needs the CSRF token with a cookie.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

ALGORITHM = "HS256"
Role = Literal["user", "service"]
# What the caller signed in with: a signed token (this installation's or the identity
# provider's), an API key, a console session, or a mailed link.
Credential = Literal["token", "api_key", "session", "link", "slack"]


class User(BaseModel):
    name: str
    role: Role = "user"
    via: Credential = "token"
    # A token's `iat`, checked against the user's cut-off (see `require_not_cut_off`).
    issued_at: float | None = None
    # A group key's maker: the person whose limits the key's calls count toward (a key acts as
    # a member of its own, `apikey:<id>`, but gets no limits beyond its maker's).
    maker: str | None = None

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


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, else None."""
    scheme, _, token = (authorization or "").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


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
    return User(name=sub, role=role, issued_at=issued_at(claims))


def issued_at(claims: dict[str, Any]) -> float | None:
    """A token's `iat`, when it carries a usable one."""
    iat = claims.get("iat")
    return float(iat) if isinstance(iat, int | float) and not isinstance(iat, bool) else None


async def require_not_cut_off(conn: asyncpg.Connection, user: User) -> None:
    """401 for a token issued before its user's access was ended (an erasure): a signed token
    cannot be deleted, so its user's row says from when tokens count again. A token with no
    `iat` cannot show it is newer."""
    not_before = await token_cutoffs.tokens_not_before(conn, user.name)
    if not_before is not None and (user.issued_at is None
                                   or user.issued_at <= not_before.timestamp()):
        raise ApiError(401, "token_revoked", "this token was issued before its user's access "
                                             "was ended; sign in again")


class NewSession(BaseModel):
    session_id: str
    csrf_token: str
    user: User


async def issue_login_code(conn: asyncpg.Connection, user: str, role: Role = "user", *,
                           ttl_seconds: float) -> str:
    """A one-time sign-in code for the console; the database keeps its hash only."""
    code = secrets.token_urlsafe(32)
    await console_sessions.create_login_code(
        conn, code, console_sessions.ConsoleIdentity(user_name=user, role=role),
        ttl_seconds=ttl_seconds)
    return code


async def exchange_login_code(conn: asyncpg.Connection, code: str, *,
                              ttl_seconds: float) -> NewSession:
    """Spend a sign-in code for a fresh session; an unknown, used or expired code is a 401."""
    async with conn.transaction():
        identity = await console_sessions.use_login_code(conn, code)
        if identity is None:
            raise ApiError(401, "invalid_login_code", "this sign-in link is unknown, already "
                                                      "used or expired; print a new one with "
                                                      "`waystation console-link`")
        return await start_session(conn, identity, ttl_seconds=ttl_seconds)


async def start_session(conn: asyncpg.Connection, identity: console_sessions.ConsoleIdentity,
                        *, ttl_seconds: float) -> NewSession:
    """A fresh console session for someone signed in (by a console link or the identity
    provider)."""
    session = NewSession(session_id=secrets.token_urlsafe(32),
                         csrf_token=secrets.token_urlsafe(32),
                         user=User(name=identity.user_name, role=identity.role))
    await console_sessions.create_session(conn, session.session_id, identity,
                                          csrf_token=session.csrf_token,
                                          ttl_seconds=ttl_seconds)
    await console_sessions.delete_stale(conn)
    return session


async def authenticate_session(conn: asyncpg.Connection, session_id: str, *, method: str,
                               csrf_token: str | None) -> User:
    """The user of a live console session; a change also needs the session's CSRF token."""
    session = await console_sessions.get_session(conn, session_id)
    if session is None:
        raise ApiError(401, "session_expired", "the console session has expired or was signed "
                                               "out; sign in again")
    if method.upper() not in SAFE_METHODS and not (
            csrf_token and hmac.compare_digest(csrf_token.encode(), session.csrf_token.encode())):
        raise ApiError(403, "csrf_failed", f"a change made with a session cookie needs the "
                                           f"session's {CSRF_HEADER} header")
    return User(name=session.user_name, role=session.role, via="session")


def can_access(user: User, run: RunRow, group_role: str | None = None) -> bool:
    """`group_role` is the user's role in the run's group, None when not a member."""
    return user.is_service or run.owner == user.name or group_role is not None


def is_decider(user: User, run: RunRow, group_role: str | None,
               decider_roles: list[str]) -> bool:
    return user.is_service or run.owner == user.name or group_role in decider_roles


def may_decide(user: User, run: RunRow, group_role: str | None, decider_roles: list[str],
               action: str) -> None:
    """Raises 403 naming the rule unless the user may `action` (decide a gate, cancel, ...):
    the run's owner, the service role, or a group member whose role is in `decider_roles`."""
    if is_decider(user, run, group_role, decider_roles):
        return
    raise ApiError(403, "not_allowed",
                   f"role {group_role!r} may not {action}: it takes the run's owner or a group "
                   f"member with role {' or '.join(decider_roles)}",
                   details=[{"role": group_role, "allowed_roles": decider_roles}])

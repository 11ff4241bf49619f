"""Per-user limits shared by every API replica: open long-lived responses at once, and writes
per minute, counted in Postgres (migration 067) so that N replicas give a user the limits one
does.

A stream holds a subscription for as long as the client likes, and a write starts work on
Temporal, so one user (or one leaked token) must not take them all. Over a limit the answer is
a 429 with Retry-After in the one error shape, before any route runs, so nothing is written.

What counts:
- a write: every POST, PUT, PATCH and DELETE, except JSON-RPC endpoints (`/a2a`, `/mcp`),
  where the dispatch names each call's kind (`count_call`): a reading method counts nothing;
- a stream: a GET whose path ends in `/stream` (the run and inbox SSE), an AG-UI POST (also a
  write), and the JSON-RPC streaming methods (A2A SendStreamingMessage, SubscribeToTask).

Each open stream is a lease with an expiry, renewed by its replica while it lasts
(`Limiter.renew`, one statement for all of a replica's streams) and released when it ends, so
a closed stream frees its slot on every replica and a replica killed outright frees its
slots once their leases lapse. No connection is held for a stream: each count borrows one
for one statement (docs/operations.md, "Limits", has the cost).

The caller is the bearer token's user, or the API key, provider token or console session
cookie itself until the request is authenticated; then it is counted as its user's as well
(`Charge.settle`), so a user's keys and sessions share one user's limits (a group key counts
toward its maker). A request with no credential passes through: the route answers 401.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import uuid
from collections.abc import AsyncIterator
from uuid import UUID

import asyncpg
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Receive, Scope, Send

from waystation.api.api_keys import is_api_key
from waystation.api.auth import SESSION_COOKIE, authenticate, bearer_token
from waystation.api.errors import ApiError, error_response, unavailable
from waystation.api.identity import is_provider_token
from waystation.api.limits import BODY_METHODS
from waystation.persistence import user_limits
from waystation.persistence.db import UNAVAILABLE_ERRORS

log = logging.getLogger(__name__)

WRITE_METHODS = BODY_METHODS | {"DELETE"}
STREAM_SUFFIX = "/stream"
# An AG-UI run is a POST that answers with a stream: it counts as both a write and a stream.
AG_UI_PREFIX = "/ag-ui/"
STREAM_RETRY_AFTER_SECONDS = 5
CHARGE_STATE = "user_limits_charge"


class Limiter:
    """One process's view of the shared limits; a limit of 0 turns that limit off."""

    def __init__(self, *, max_streams: int, writes_per_minute: int,
                 lease_seconds: float) -> None:
        self.max_streams = max_streams
        self.writes_per_minute = writes_per_minute
        self.lease_seconds = lease_seconds
        self.pool: asyncpg.Pool | None = None
        # The leases of this process's open streams, renewed together.
        self.held: set[UUID] = set()
        self._renewing: asyncio.Task[None] | None = None

    @property
    def streams_message(self) -> str:
        return f"at most {self.max_streams} open streams per user"

    async def start(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self._renewing = asyncio.create_task(self._renew_forever(), name="stream-leases")

    async def stop(self) -> None:
        if self._renewing is not None:
            self._renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewing

    async def take_write(self, caller: str) -> None:
        """Counts one write of `caller`; a 429 with Retry-After when over the limit."""
        if not self.writes_per_minute:
            return
        async with self._connection() as conn:
            wait = await user_limits.take_write(conn, _counted_as(caller), self.writes_per_minute)
        if wait > 0:
            raise ApiError(429, "rate_limited", "too many writes; slow down",
                           headers={"Retry-After": str(max(1, math.ceil(wait)))})

    async def hold_stream(self, caller: str, lease: UUID) -> None:
        """Holds `lease` for `caller` (moves it there when held for another); a 429 when the
        caller holds the most open streams already."""
        async with self._connection() as conn:
            held = await user_limits.hold_stream(conn, lease, _counted_as(caller),
                                                 most=self.max_streams,
                                                 ttl_seconds=self.lease_seconds)
        if not held:
            raise ApiError(429, "rate_limited", self.streams_message,
                           headers={"Retry-After": str(STREAM_RETRY_AFTER_SECONDS)})
        self.held.add(lease)

    async def release_stream(self, lease: UUID) -> None:
        """Frees the slot everywhere; should the database be unreachable now (or the pool
        closed, at shutdown), the lease is no longer renewed and lapses."""
        self.held.discard(lease)
        try:
            async with self._connection() as conn:
                await user_limits.release_stream(conn, lease)
        except (ApiError, asyncpg.InterfaceError,
                *UNAVAILABLE_ERRORS) as error:
            log.warning("stream lease %s left to lapse: %s", lease, error)

    async def renew(self) -> None:
        """One statement for every stream this process holds open."""
        async with self._connection() as conn:
            await user_limits.renew_streams(conn, list(self.held), self.lease_seconds)

    async def _renew_forever(self) -> None:
        # Three renewals per lease lifetime: a late one or two does not lose a live stream.
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                await self.renew()
            except (ApiError, *UNAVAILABLE_ERRORS) as error:  # type: ignore[misc]
                log.warning("stream leases not renewed: %s", error)

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection for one statement: the limits' functions need no claims."""
        assert self.pool is not None, "started in the app's lifespan"
        try:
            conn = await self.pool.acquire(timeout=10)
        except (*UNAVAILABLE_ERRORS, TimeoutError) as error:  # type: ignore[misc]
            raise unavailable(f"database is unavailable: {error}") from error
        try:
            yield conn
        finally:
            await self.pool.release(conn)


class Charge:
    """What a request has been counted as. An API key, a provider token or a session is
    counted as itself until it is checked; `settle` (called once the request is
    authenticated, `waystation.api.deps.authenticate_request`) counts it as its user too, so a
    user's keys and sessions share the user's limits instead of multiplying them. A JSON-RPC call is
    counted at its dispatch (`count_call`), once its method is known."""

    def __init__(self, limiter: Limiter, caller: str, *, write: bool) -> None:
        self.limiter, self.caller, self.write = limiter, caller, write
        self.lease: UUID | None = None

    async def open_stream(self) -> None:
        lease = uuid.uuid4()
        await self.limiter.hold_stream(self.caller, lease)
        self.lease = lease

    async def settle(self, user: str) -> None:
        """Count the request as `user`'s: 429 `rate_limited` when that is over a limit."""
        if user == self.caller:
            return
        if self.write:
            await self.limiter.take_write(user)
        if self.lease is not None:
            await self.limiter.hold_stream(user, self.lease)
        self.caller = user

    async def count(self, *, write: bool, stream: bool) -> None:
        """Count a dispatched call of the (settled) caller."""
        if write and not self.write:
            await self.limiter.take_write(self.caller)
            self.write = True
        if stream and self.lease is None and self.limiter.max_streams:
            await self.open_stream()


async def settle_charge(scope: Scope, user: str) -> None:
    """Count an authenticated request as `user`'s (see Charge); nothing when uncounted."""
    charge = scope.get("state", {}).get(CHARGE_STATE)
    if isinstance(charge, Charge):
        await charge.settle(user)


async def count_call(scope: Scope, *, write: bool, stream: bool) -> None:
    """Count one JSON-RPC call (a write, a stream) against its authenticated caller; a 429
    `ApiError` when over a limit, before the call does anything."""
    charge = scope.get("state", {}).get(CHARGE_STATE)
    if isinstance(charge, Charge):
        await charge.count(write=write, stream=stream)


class UserLimits:
    """ASGI middleware counting each request against its caller's limits (`Limiter`). The
    paths of `dispatched` (JSON-RPC endpoints) are counted by their dispatch instead."""

    def __init__(self, app: ASGIApp, *, limiter: Limiter, jwt_secret: str,
                 dispatched: frozenset[str]) -> None:
        self.app = app
        self.limiter = limiter
        self.jwt_secret = jwt_secret
        self.dispatched = dispatched

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        dispatched = method == "POST" and path in self.dispatched
        stream = self.limiter.max_streams > 0 and not dispatched and (
            (method == "GET" and path.endswith(STREAM_SUFFIX))
            or (method == "POST" and path.startswith(AG_UI_PREFIX)))
        write = method in WRITE_METHODS and not dispatched
        caller = self._user(scope) if stream or write or dispatched else None
        if caller is None:
            await self.app(scope, receive, send)
            return
        charge = Charge(self.limiter, caller, write=write)
        try:
            if write:
                await self.limiter.take_write(caller)
            if stream:
                await charge.open_stream()
        except ApiError as refused:
            await error_response(refused.status, refused.code, refused.message,
                                 headers=refused.headers)(scope, receive, send)
            return
        scope.setdefault("state", {})[CHARGE_STATE] = charge
        try:
            await self.app(scope, receive, send)
        finally:
            if charge.lease is not None:
                # Shielded: a cancelled request must still free its slot at once.
                await asyncio.shield(self.limiter.release_stream(charge.lease))

    def _user(self, scope: Scope) -> str | None:
        header = next((v for k, v in scope["headers"] if k == b"authorization"), None)
        authorization = header.decode("latin-1") if header else None
        try:
            return authenticate(self.jwt_secret, authorization).name
        except ApiError:
            pass
        # An API key, an identity provider's token or a console session is checked later (it
        # needs the database or the JWKS); until then the credential itself is the caller. A
        # forged one is a 401 anyway.
        token = bearer_token(authorization)
        if token is not None:
            if not (is_api_key(token) or is_provider_token(token)):
                return None
            return "token:" + hashlib.sha256(token.encode()).hexdigest()[:32]
        session_id = _cookie(scope, SESSION_COOKIE)
        if session_id is None:
            return None
        return "session:" + hashlib.sha256(session_id.encode()).hexdigest()[:32]


def _counted_as(caller: str) -> str:
    """The caller as the shared counts name it: a hash, so that no table names a person (an
    erasure need not find them there; see persistence/erasure.py)."""
    return hashlib.sha256(caller.encode()).hexdigest()


def _cookie(scope: Scope, name: str) -> str | None:
    header = next((v for k, v in scope["headers"] if k == b"cookie"), None)
    return cookie_parser(header.decode("latin-1")).get(name) if header else None

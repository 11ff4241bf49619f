"""Per-user limits, per API process: open event streams at once, and writes per minute.

A stream holds a connection and a subscription for as long as the client likes, and a write
starts work on Temporal, so one user (or one leaked token) must not take them all. Over a
limit the answer is a 429 with Retry-After in the one error shape, before any route runs, so
nothing is written. The caller is the bearer token's user, or the API key, provider token or
console session cookie itself until the request is authenticated; then it is counted as its
user's as well (`Charge.settle`), so a user's keys and sessions share one user's limits. A
request with no credential passes through: the route answers 401.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter
from dataclasses import dataclass

from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Receive, Scope, Send

from api.api_keys import is_api_key
from api.auth import SESSION_COOKIE, authenticate, bearer_token
from api.errors import ApiError, error_response
from api.identity import is_provider_token
from api.limits import BODY_METHODS

WRITE_METHODS = BODY_METHODS | {"DELETE"}
STREAM_SUFFIX = "/stream"
# An AG-UI run is a POST that answers with a stream: it counts as both a write and a stream.
AG_UI_PREFIX = "/ag-ui/"
STREAM_RETRY_AFTER_SECONDS = 5
# Idle users' buckets are forgotten once this many users have one (a full bucket is the
# same as none).
MAX_TRACKED_USERS = 10_000


@dataclass
class _Bucket:
    tokens: float
    at: float


class WriteRate:
    """A token bucket per user: `per_minute` writes, refilled continuously, bursts of at most
    `per_minute`."""

    def __init__(self, per_minute: int) -> None:
        self.capacity = float(per_minute)
        self.per_second = per_minute / 60.0
        self._buckets: dict[str, _Bucket] = {}

    def take(self, user: str, now: float) -> float:
        """0 when the write may go ahead, else the seconds until it may."""
        bucket = self._buckets.get(user)
        if bucket is None:
            if len(self._buckets) >= MAX_TRACKED_USERS:
                self._forget_full(now)
            bucket = self._buckets[user] = _Bucket(self.capacity, now)
        bucket.tokens = min(self.capacity, bucket.tokens + (now - bucket.at) * self.per_second)
        bucket.at = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return 0.0
        return (1 - bucket.tokens) / self.per_second

    def _forget_full(self, now: float) -> None:
        for user, bucket in list(self._buckets.items()):
            if bucket.tokens + (now - bucket.at) * self.per_second >= self.capacity:
                del self._buckets[user]


CHARGE_STATE = "user_limits_charge"


class Charge:
    """What a request was counted as before its credential was checked. An API key, a
    provider token or a session is counted as itself until then; `settle` (called once the
    request is authenticated, `api.deps.authenticate_request`) counts it as its user too, so
    a user's keys and sessions share the user's limits instead of multiplying them."""

    def __init__(self, limits: UserLimits, caller: str, *, write: bool, stream: bool) -> None:
        self.limits, self.caller, self.write, self.stream = limits, caller, write, stream

    def settle(self, user: str) -> None:
        """Count the request as `user`'s: 429 `rate_limited` when that is over a limit."""
        if user == self.caller:
            return
        limits = self.limits
        if self.write and limits.writes is not None:
            wait = limits.writes.take(user, time.monotonic())
            if wait > 0:
                raise ApiError(429, "rate_limited", "too many writes; slow down",
                               headers={"Retry-After": str(max(1, math.ceil(wait)))})
        if self.stream:
            if limits.open_streams[user] >= limits.max_streams:
                raise ApiError(429, "rate_limited", limits.streams_message,
                               headers={"Retry-After": str(STREAM_RETRY_AFTER_SECONDS)})
            limits.open_streams[self.caller] -= 1
            if not limits.open_streams[self.caller]:
                del limits.open_streams[self.caller]
            limits.open_streams[user] += 1
        self.caller = user


def settle_charge(scope: Scope, user: str) -> None:
    """Count an authenticated request as `user`'s (see Charge); nothing when uncounted."""
    charge = scope.get("state", {}).get(CHARGE_STATE)
    if isinstance(charge, Charge):
        charge.settle(user)


class UserLimits:
    """ASGI middleware; a limit of 0 turns that limit off."""

    def __init__(self, app: ASGIApp, *, jwt_secret: str, max_streams: int,
                 writes_per_minute: int) -> None:
        self.app = app
        self.jwt_secret = jwt_secret
        self.max_streams = max_streams
        self.writes = WriteRate(writes_per_minute) if writes_per_minute > 0 else None
        self.open_streams: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        is_stream = (scope["method"] == "GET" and scope["path"].endswith(STREAM_SUFFIX)) or (
            scope["method"] == "POST" and scope["path"].startswith(AG_UI_PREFIX))
        is_write = scope["method"] in WRITE_METHODS
        caller = self._user(scope) if (is_stream and self.max_streams) or is_write else None
        if caller is None:
            await self.app(scope, receive, send)
            return
        if is_write and self.writes is not None:
            wait = self.writes.take(caller, time.monotonic())
            if wait > 0:
                await _too_many(scope, receive, send, math.ceil(wait),
                                "too many writes; slow down")
                return
        stream = is_stream and self.max_streams > 0
        if stream and self.open_streams[caller] >= self.max_streams:
            await _too_many(scope, receive, send, STREAM_RETRY_AFTER_SECONDS,
                            self.streams_message)
            return
        charge = Charge(self, caller, write=is_write, stream=stream)
        scope.setdefault("state", {})[CHARGE_STATE] = charge
        if stream:
            self.open_streams[caller] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            if stream:
                self.open_streams[charge.caller] -= 1
                if not self.open_streams[charge.caller]:
                    del self.open_streams[charge.caller]

    @property
    def streams_message(self) -> str:
        return f"at most {self.max_streams} open streams per user"

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


def _cookie(scope: Scope, name: str) -> str | None:
    header = next((v for k, v in scope["headers"] if k == b"cookie"), None)
    return cookie_parser(header.decode("latin-1")).get(name) if header else None


async def _too_many(scope: Scope, receive: Receive, send: Send, retry_after: int,
                    message: str) -> None:
    response = error_response(429, "rate_limited", message,
                              headers={"Retry-After": str(max(1, retry_after))})
    await response(scope, receive, send)

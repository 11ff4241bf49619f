"""Shared route dependencies, created once in the app's lifespan and read from app.state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated
from uuid import UUID

import asyncpg
from fastapi import Depends, Header, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from temporalio.client import Client

from waystation.api.api_keys import authenticate_api_key, is_api_key
from waystation.api.auth import (
    CSRF_HEADER,
    SESSION_COOKIE,
    User,
    authenticate,
    authenticate_session,
    bearer_token,
    require_not_cut_off,
)
from waystation.api.errors import ApiError, unavailable
from waystation.api.identity import IdentityProvider, is_provider_token
from waystation.api.rate_limits import settle_charge
from waystation.api.services.access import claims_of
from waystation.api.services.runs import visible_run
from waystation.api.temporal_gateway import TemporalGateway
from waystation.persistence.claims import AUTHENTICATOR, Claims, set_claims
from waystation.persistence.db import UNAVAILABLE_ERRORS
from waystation.persistence.models import RunRow
from waystation.registry import Registry
from waystation.settings import Settings


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_registry(request: Request) -> Registry:
    return request.app.state.registry


@asynccontextmanager
async def pooled_connection(request: Request, claims: Claims) -> AsyncIterator[asyncpg.Connection]:
    """A connection whose queries run for `claims` (row-level security, migration 022)."""
    pool: asyncpg.Pool = request.app.state.pool
    try:
        conn = await pool.acquire(timeout=10)
    except (*UNAVAILABLE_ERRORS, TimeoutError) as error:  # type: ignore[misc]  # down or starting
        raise unavailable(f"database is unavailable: {error}") from error
    try:
        try:
            await set_claims(conn, claims)
        except UNAVAILABLE_ERRORS as error:  # the connection died while idle in the pool
            raise unavailable(f"database is unavailable: {error}") from error
        yield conn
    finally:
        await pool.release(conn)


async def get_temporal(request: Request) -> Client:
    gateway: TemporalGateway = request.app.state.temporal
    return await gateway.client()


# Declares the bearer scheme in OpenAPI. The raw header is parsed by `authenticate`, which
# names each way a token can be wrong (HTTPBearer would answer them all alike).
BEARER = HTTPBearer(auto_error=False, scheme_name="bearer", bearerFormat="JWT",
                    description="An HS256 JWT: `sub` is the user, `role` `user` or `service` "
                                "(`waystation token --user NAME`); an RS256/ES256 JWT of the "
                                "identity provider (WAYSTATION_JWKS_URL); or an API key "
                                "(`wsk_...`, POST /api-keys).")


async def authenticate_request(request: Request) -> User:
    """The caller of any HTTP request (a route, the MCP endpoint): a bearer token when one is
    sent (an API key, an identity provider's JWT when WAYSTATION_JWKS_URL is set, else this
    installation's HS256 JWT), else the console session cookie. Raises a 401 `ApiError`."""
    authorization = request.headers.get("authorization")
    session_id = request.cookies.get(SESSION_COOKIE)
    token = bearer_token(authorization)
    provider: IdentityProvider | None = request.app.state.identity_provider
    user = None
    if token is not None and provider is not None and is_provider_token(token):
        user = await provider.authenticate(token)
    elif (token is None or not is_api_key(token)) and (authorization is not None
                                                       or not session_id):
        user = authenticate(request.app.state.settings.jwt_secret, authorization)
    # Borrowed only for the lookup: a stream must not hold a connection for its lifetime.
    async with pooled_connection(request, AUTHENTICATOR) as conn:
        if user is not None:  # a signed token: unless its user's access has ended since
            await require_not_cut_off(conn, user)
        elif token is not None:
            user = await authenticate_api_key(conn, token)
        else:
            assert session_id is not None, "no token: the session cookie"
            user = await authenticate_session(conn, session_id, method=request.method,
                                              csrf_token=request.headers.get(CSRF_HEADER))
    # The limits counted a key, provider token or session as itself until now.
    await settle_charge(request.scope, user.maker or user.name)
    return user


async def get_user(
    request: Request,
    _declared: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)] = None,
) -> User:
    """The route's caller (see `authenticate_request`)."""
    return await authenticate_request(request)


CurrentUser = Annotated[User, Depends(get_user)]


async def get_conn(request: Request, user: CurrentUser) -> AsyncIterator[asyncpg.Connection]:
    async with pooled_connection(request, claims_of(user)) as conn:
        yield conn


async def get_authenticator_conn(request: Request) -> AsyncIterator[asyncpg.Connection]:
    async with pooled_connection(request, AUTHENTICATOR) as conn:
        yield conn


SettingsDep = Annotated[Settings, Depends(get_settings)]
# Printable ASCII, as HTTP headers carry it: the same key again returns the same answer.
IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", min_length=1,
                                              max_length=200, pattern=r"^[\x21-\x7e]+$")]
RegistryDep = Annotated[Registry, Depends(get_registry)]
TemporalClient = Annotated[Client, Depends(get_temporal)]
# The caller's claims are set on it (see claims_of).
Conn = Annotated[asyncpg.Connection, Depends(get_conn, scope="function")]
# For routes whose caller is known only by a secret the request carries (a sign-in code, a
# mailed link): it sees credentials only, until `waystation.api.services.access.act_as`.
AuthenticatorConn = Annotated[asyncpg.Connection,
                              Depends(get_authenticator_conn, scope="function")]


async def get_visible_run(run_id: UUID, user: CurrentUser, conn: Conn) -> RunRow:
    """The run, if the caller may see it; another user's run is indistinguishable from none."""
    return await visible_run(conn, user, run_id)


async def still_signed_in(request: Request, user: User) -> bool:
    """Whether the credential a stream's request carries still signs in as `user`, checked
    as on any request (a revoked key, a signed-out or expired session, an expired or cut-off
    token: no). A database that cannot answer is an error, not a no."""
    try:
        again = await authenticate_request(request)
    except ApiError as refused:
        if refused.status >= 500:
            raise
        return False
    return (again.name, again.role) == (user.name, user.role)


async def still_reads_run(request: Request, user: User, run_id: UUID) -> bool:
    """Whether a stream's caller may still read the run: signed in as before, and allowed as
    `GET /runs/{id}` allows it."""
    if not await still_signed_in(request, user):
        return False
    async with pooled_connection(request, claims_of(user)) as conn:
        try:
            await visible_run(conn, user, run_id)
        except ApiError as refused:
            if refused.status >= 500:
                raise
            return False
    return True


VisibleRun = Annotated[RunRow, Depends(get_visible_run)]

"""Tokens from an identity provider: RS256 or ES256 JWTs checked against its JWKS.

Beside the HS256 tokens this installation signs (api/auth.py), production callers bring
tokens from their identity provider. The signing key is the JWKS key the token's `kid` names
(fetched, then cached for five minutes, and fetched again for an unknown `kid`, at most
every 30 s, so key rotation needs no restart); `aud` and `iss` must be the configured ones;
`exp` (and `nbf`) are checked with a little leeway for clocks that disagree. Such a token is
always a plain user: the service role is only for tokens this installation signs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import jwt

from waystation.api.auth import User, issued_at
from waystation.api.errors import ApiError, unavailable

ALGORITHMS = ("RS256", "ES256")
JWKS_TIMEOUT_SECONDS = 5.0


def is_provider_token(token: str) -> bool:
    """A JWT signed with one of the provider algorithms (decided by its header only)."""
    try:
        return jwt.get_unverified_header(token).get("alg") in ALGORITHMS
    except jwt.InvalidTokenError:
        return False


class IdentityProvider:
    def __init__(self, jwks_url: str, *, audience: str, issuer: str, leeway_seconds: float,
                 refetch_cooldown_seconds: float = 30.0) -> None:
        # An unknown `kid` fetches the JWKS again, but at most once per cooldown: tokens with
        # made-up kids must not turn the API into a flood on the provider.
        self._keys = jwt.PyJWKClient(jwks_url, cache_keys=True, lifespan=300,
                                     timeout=JWKS_TIMEOUT_SECONDS,
                                     cooldown_duration=refetch_cooldown_seconds)
        self._audience, self._issuer, self._leeway = audience, issuer, leeway_seconds

    async def verified_claims(self, token: str) -> dict[str, Any]:
        """The token's claims once its signature, `aud`, `iss` and `exp` hold.

        Raises `jwt.InvalidTokenError` (or `jwt.PyJWKClientError` for a `kid` the JWKS lacks)
        for a token to refuse, and 503 when the provider's keys cannot be fetched; callers
        choose how to refuse (a bearer token is a 401, a console sign-in a 403)."""
        try:
            # PyJWKClient fetches over blocking urllib: off the event loop.
            key = await asyncio.to_thread(self._keys.get_signing_key_from_jwt, token)
        except (jwt.PyJWKClientConnectionError, jwt.PyJWKSetError) as error:
            # The provider is down or serves no usable key: not the caller's fault.
            raise unavailable(f"the identity provider's keys cannot be used: {error}") \
                from error
        return jwt.decode(token, key.key, algorithms=list(ALGORITHMS), audience=self._audience,
                          issuer=self._issuer, leeway=self._leeway,
                          options={"require": ["sub", "exp", "aud", "iss"]})

    async def authenticate(self, token: str) -> User:
        try:
            claims = await self.verified_claims(token)
        except jwt.ExpiredSignatureError as error:
            raise ApiError(401, "token_expired", "token has expired") from error
        except (jwt.PyJWKClientError, jwt.InvalidTokenError) as error:
            raise ApiError(401, "invalid_token", f"invalid token: {error}") from error
        sub = claims["sub"]
        if not isinstance(sub, str) or not sub or len(sub) > 200:
            raise ApiError(401, "invalid_token", "invalid token: 'sub' must be a non-empty string")
        return User(name=sub, issued_at=issued_at(claims))

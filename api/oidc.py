"""Console sign-in through an OpenID Connect provider: the authorization-code flow with PKCE.

The sign-in starts by sending the browser to the provider with a fresh state, nonce and PKCE
challenge. The three are kept in a short-lived cookie signed with the installation's secret
(HttpOnly, sent to the callback's path only), so only the browser that started a sign-in can
finish it, and an abandoned sign-in leaves nothing behind. The callback spends the code at the
provider's token endpoint (with the PKCE verifier, and the client secret for a confidential
client) and believes the ID token only once its signature (the provider's JWKS, through
waystation.api.identity), `iss`, `aud`, `exp` and `nonce` hold.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
import time
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import jwt
from pydantic import BaseModel, ValidationError

from waystation.api.auth import ALGORITHM
from waystation.api.errors import ApiError, unavailable
from waystation.api.identity import IdentityProvider
from waystation.settings import Settings

FLOW_COOKIE = "waystation_oidc"
FLOW_PATH = "/console/oidc"
CALLBACK_PATH = f"{FLOW_PATH}/callback"
FLOW_SECONDS = 600
# Names what the flow cookie is for: it can never pass for a bearer token (those carry no
# audience) nor the other way round.
FLOW_AUDIENCE = "waystation-oidc-sign-in"
HTTP_TIMEOUT_SECONDS = 10.0
MAX_USER_NAME = 200


class ProviderMetadata(BaseModel):
    """The parts of the provider's discovery document the sign-in uses."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    # The specification's default when the provider does not say.
    token_endpoint_auth_methods_supported: list[str] = ["client_secret_basic"]
    # OpenID Connect RP-Initiated Logout 1.0: where signing out of the console also signs
    # the browser out of the provider (absent: the provider offers none).
    end_session_endpoint: str | None = None


class SignInFlow(BaseModel):
    """What the callback checks the provider's answer against."""

    state: str
    nonce: str
    verifier: str

    @classmethod
    def fresh(cls) -> SignInFlow:
        return cls(state=secrets.token_urlsafe(32), nonce=secrets.token_urlsafe(32),
                   verifier=secrets.token_urlsafe(64))

    @property
    def challenge(self) -> str:
        digest = hashlib.sha256(self.verifier.encode()).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def seal(self, secret: str) -> str:
        """The flow as the value of its signed cookie."""
        now = int(time.time())
        return jwt.encode({**self.model_dump(), "aud": FLOW_AUDIENCE, "iat": now,
                           "exp": now + FLOW_SECONDS}, secret, algorithm=ALGORITHM)

    @classmethod
    def unseal(cls, cookie: str | None, secret: str, state: str) -> SignInFlow:
        """The flow this browser started, if its cookie is intact and names `state`."""
        if not cookie:
            raise refused("no sign-in was started in this browser (or it took over "
                          f"{FLOW_SECONDS // 60} minutes); start again")
        try:
            claims = jwt.decode(cookie, secret, algorithms=[ALGORITHM], audience=FLOW_AUDIENCE,
                                options={"require": ["exp", "aud"]})
            flow = cls.model_validate(claims)
        except (jwt.InvalidTokenError, ValidationError) as error:
            raise refused("the sign-in cookie is invalid or expired; start again") from error
        if not hmac.compare_digest(flow.state.encode(), state.encode()):
            raise refused("the sign-in state does not match the one this browser started")
        return flow


def refused(message: str) -> ApiError:
    return ApiError(403, "oidc_failed", message)


class OidcClient:
    """The console's client of one OpenID Connect provider; discovery is fetched at the
    first sign-in (so the API starts while the provider is down) and then kept."""

    def __init__(self, *, issuer: str, client_id: str, client_secret: str | None, scopes: str,
                 user_claim: str, provider_name: str | None, leeway_seconds: float) -> None:
        self._issuer, self._client_id, self._client_secret = issuer, client_id, client_secret
        self._scopes, self._user_claim, self._leeway = scopes, user_claim, leeway_seconds
        self.provider_name = provider_name or urlsplit(issuer).hostname or issuer
        self._metadata: ProviderMetadata | None = None
        self._id_tokens: IdentityProvider | None = None
        self._discovery_lock = asyncio.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> OidcClient | None:
        if settings.oidc_issuer is None:
            return None
        assert settings.oidc_client_id, "Settings requires a client id with an issuer"
        return cls(issuer=settings.oidc_issuer, client_id=settings.oidc_client_id,
                   client_secret=settings.oidc_client_secret, scopes=settings.oidc_scopes,
                   user_claim=settings.oidc_user_claim,
                   provider_name=settings.oidc_provider_name,
                   leeway_seconds=settings.jwt_leeway_seconds)

    async def authorization_url(self, flow: SignInFlow, redirect_uri: str) -> str:
        metadata = await self._discover()
        query = urlencode({
            "response_type": "code", "client_id": self._client_id, "scope": self._scopes,
            "redirect_uri": redirect_uri, "state": flow.state, "nonce": flow.nonce,
            "code_challenge": flow.challenge, "code_challenge_method": "S256"})
        separator = "&" if "?" in metadata.authorization_endpoint else "?"
        return f"{metadata.authorization_endpoint}{separator}{query}"

    async def user_for_code(self, code: str, flow: SignInFlow, redirect_uri: str) -> str:
        """The Waystation user the provider signed in: the configured claim of a verified
        ID token."""
        id_token = await self._exchange(code, flow, redirect_uri)
        assert self._id_tokens is not None, "discovered by _exchange"
        try:
            claims = await self._id_tokens.verified_claims(id_token)
        except (jwt.PyJWKClientError, jwt.InvalidTokenError) as error:
            raise refused(f"the identity provider's ID token is invalid: {error}") from error
        if not hmac.compare_digest(str(claims.get("nonce", "")).encode(), flow.nonce.encode()):
            raise refused("the ID token's nonce is not the one this sign-in sent")
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self._client_id:
            raise refused("the ID token names several audiences but is not for this client")
        # An address the provider says it has not verified could be anybody's.
        if self._user_claim == "email" and claims.get("email_verified") is False:
            raise refused("the identity provider has not verified this email address")
        user = claims.get(self._user_claim)
        if not isinstance(user, str) or not user or len(user) > MAX_USER_NAME:
            raise refused(f"the ID token's {self._user_claim!r} claim is not a user name "
                          f"(a string of 1 to {MAX_USER_NAME} characters)")
        return user

    async def _exchange(self, code: str, flow: SignInFlow, redirect_uri: str) -> str:
        """Spend the code at the token endpoint; its ID token."""
        metadata = await self._discover()
        form = {"grant_type": "authorization_code", "code": code,
                "redirect_uri": redirect_uri, "code_verifier": flow.verifier,
                "client_id": self._client_id}
        auth: httpx.BasicAuth | None = None
        if self._client_secret is not None:
            if "client_secret_basic" in metadata.token_endpoint_auth_methods_supported:
                auth = httpx.BasicAuth(self._client_id, self._client_secret)
            else:
                form["client_secret"] = self._client_secret
        answer = await _http("POST", metadata.token_endpoint, data=form, auth=auth)
        if answer.status_code >= 500:
            raise unavailable(f"the identity provider's token endpoint answered "
                              f"{answer.status_code}")
        body = _json_object(answer)
        if answer.status_code != 200:
            raise refused(f"the identity provider refused the sign-in code: "
                          f"{body.get('error', answer.status_code)}")
        id_token = body.get("id_token")
        if not isinstance(id_token, str) or not id_token:
            raise refused("the identity provider's token answer has no ID token")
        return id_token

    async def logout_url(self, after: str) -> str | None:
        """Where to send the browser to sign out at the provider too, coming back to `after`
        (RP-Initiated Logout with `client_id`, since the console keeps no ID token)."""
        endpoint = (await self._discover()).end_session_endpoint
        if endpoint is None:
            return None
        query = urlencode({"client_id": self._client_id, "post_logout_redirect_uri": after})
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"

    async def _discover(self) -> ProviderMetadata:
        async with self._discovery_lock:
            if self._metadata is None:
                url = f"{self._issuer.rstrip('/')}/.well-known/openid-configuration"
                answer = await _http("GET", url)
                try:
                    answer.raise_for_status()
                    metadata = ProviderMetadata.model_validate(_json_object(answer))
                except (httpx.HTTPStatusError, ValidationError) as error:
                    raise unavailable(f"the identity provider's discovery document at {url} "
                                      f"cannot be used: {error}") from error
                # OpenID Connect Discovery 1.0 §4.3: the document must name the issuer asked.
                if metadata.issuer.rstrip("/") != self._issuer.rstrip("/"):
                    raise unavailable(f"the discovery document names issuer "
                                      f"{metadata.issuer!r}, not WAYSTATION_OIDC_ISSUER")
                self._id_tokens = IdentityProvider(
                    metadata.jwks_uri, audience=self._client_id, issuer=metadata.issuer,
                    leeway_seconds=self._leeway)
                self._metadata = metadata
            return self._metadata


async def _http(method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One request to the provider; its being unreachable is a 503, not the browser's fault."""
    try:
        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_SECONDS) as http:
            return await http.request(method, url, **kwargs)
    except httpx.HTTPError as error:
        raise unavailable(f"the identity provider is unreachable: {error}") from error


def _json_object(answer: httpx.Response) -> dict[str, Any]:
    try:
        body = answer.json()
    except ValueError:
        body = None
    return body if isinstance(body, dict) else {}

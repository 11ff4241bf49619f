"""Console sign-in through an OpenID Connect provider, over HTTP against a real local provider
(tests/oidc_stub.py): the whole code flow with PKCE, and every way the callback must refuse
(state, nonce, audience, signature) without creating a session."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import pytest_asyncio

from tests.oidc_stub import OidcStub, oidc_provider
from waystation.api.app import create_app
from waystation.api.auth import SESSION_COOKIE
from waystation.api.oidc import FLOW_COOKIE
from waystation.settings import Settings
from waystation.testing import free_port

SECRET = "oidc-secret-0123456789-0123456789-abcdefgh"
CONSOLE = "http://console.test"
CLIENT_ID, CLIENT_SECRET = "waystation-console", "stub-client-secret"


@pytest.fixture
def provider() -> Iterator[OidcStub]:
    with oidc_provider(CLIENT_ID, CLIENT_SECRET) as stub:
        yield stub


async def _client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=CONSOLE) as http:
            yield http


def _settings(migrated_url: str, **oidc: str) -> Settings:
    # Temporal is never reached: sign-in needs only the database and the provider.
    return Settings(database_url=migrated_url, jwt_secret=SECRET, console_url=CONSOLE,
                    temporal_address=f"127.0.0.1:{free_port()}", **oidc)


@pytest_asyncio.fixture
async def client(migrated_url: str, provider: OidcStub) -> AsyncIterator[httpx.AsyncClient]:
    settings = _settings(migrated_url, oidc_issuer=provider.issuer, oidc_client_id=CLIENT_ID,
                         oidc_client_secret=CLIENT_SECRET, oidc_user_claim="email",
                         oidc_provider_name="Stub ID")
    async for http in _client(settings):
        yield http


async def _to_callback(client: httpx.AsyncClient) -> str:
    """Start a sign-in and let the provider approve it: the callback URL it sends back to."""
    started = await client.get("/console/oidc/login")
    assert started.status_code == 302, started.text
    assert FLOW_COOKIE in client.cookies
    async with httpx.AsyncClient() as browser:
        approved = await browser.get(started.headers["location"])
    assert approved.status_code == 302
    callback = approved.headers["location"]
    assert callback.startswith(f"{CONSOLE}/console/oidc/callback?")
    return callback


async def _sessions(pool) -> int:
    async with pool.acquire() as conn:
        return await conn.fetchval("SELECT count(*) FROM console_sessions")


async def test_sign_in_through_the_provider_makes_a_console_session(client, provider, pool):
    config = (await client.get("/console/config")).json()
    assert config["oidc_provider"] == "Stub ID"
    # Signing out of the console signs out at the provider too, coming back to the console.
    logout = urlsplit(config["oidc_logout_url"])
    assert f"{logout.scheme}://{logout.netloc}{logout.path}" == f"{provider.issuer}/logout"
    assert parse_qs(logout.query) == {"client_id": [CLIENT_ID],
                                      "post_logout_redirect_uri": [f"{CONSOLE}/"]}
    started = await client.get("/console/oidc/login")
    assert started.status_code == 302
    assert started.headers["cache-control"] == "no-store"
    target = urlsplit(started.headers["location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == f"{provider.issuer}/authorize"
    query = {k: v[0] for k, v in parse_qs(target.query).items()}
    assert query["redirect_uri"] == f"{CONSOLE}/console/oidc/callback"
    assert query["scope"] == "openid profile email" and query["code_challenge_method"] == "S256"
    assert len(query["state"]) >= 32 and len(query["nonce"]) >= 32
    flow_cookie = started.headers["set-cookie"]
    assert "HttpOnly" in flow_cookie and "Path=/console/oidc" in flow_cookie

    async with httpx.AsyncClient() as browser:
        approved = await browser.get(started.headers["location"])
    sessions_before = await _sessions(pool)
    finished = await client.get(approved.headers["location"])
    assert finished.status_code == 303, finished.text
    assert finished.headers["location"] == "/"  # no code or token left in the address bar
    assert finished.headers["cache-control"] == "no-store"
    cookies = finished.headers.get_list("set-cookie")
    session_cookie = next(c for c in cookies if c.startswith(f"{SESSION_COOKIE}="))
    assert "HttpOnly" in session_cookie and "SameSite=lax" in session_cookie
    assert any(c.startswith(f'{FLOW_COOKIE}=""') for c in cookies)  # the flow is over

    session = (await client.get("/console/session")).json()
    assert session["user"] == "ida@example.test" and session["role"] == "user"
    assert len(session["csrf_token"]) >= 32
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT user_name FROM console_sessions ORDER BY expires_at "
                                   "DESC LIMIT 1") == "ida@example.test"
    assert await _sessions(pool) == sessions_before + 1
    # The flow is over: the same callback again signs nobody in.
    client.cookies.clear()
    assert (await client.get(approved.headers["location"])).status_code == 403


@pytest.mark.parametrize("spoil", ["state", "no_flow_cookie", "audience", "nonce", "signature",
                                   "issuer", "expired", "denied", "unverified_email"])
async def test_a_spoiled_sign_in_is_refused_and_makes_no_session(client, provider, pool, spoil):
    if spoil == "audience":
        provider.id_token_claims["aud"] = "someone-else"
    elif spoil == "nonce":
        provider.id_token_claims["nonce"] = "not-the-nonce"
    elif spoil == "signature":
        provider.sign_with_foreign_key = True
    elif spoil == "issuer":
        provider.id_token_claims["iss"] = "http://evil.test"
    elif spoil == "expired":
        provider.id_token_claims["exp"] = 1_000_000
    elif spoil == "unverified_email":
        provider.id_token_claims["email_verified"] = False
    callback = await _to_callback(client)
    sessions_before = await _sessions(pool)
    if spoil == "state":
        callback = callback.replace("state=", "state=x")
    elif spoil == "no_flow_cookie":
        client.cookies.clear()
    elif spoil == "denied":
        callback = callback.split("?")[0] + "?error=access_denied&state=" + \
            parse_qs(urlsplit(callback).query)["state"][0]
    refused = await client.get(callback)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "oidc_failed"
    assert not any(c.startswith(f"{SESSION_COOKIE}=")
                   for c in refused.headers.get_list("set-cookie"))
    assert await _sessions(pool) == sessions_before
    assert (await client.get("/console/session")).status_code == 401
    # A refused state never reaches the provider's token endpoint.
    assert provider.token_requests == (0 if spoil in ("state", "no_flow_cookie", "denied")
                                       else 1)


async def test_user_claim_missing_from_the_id_token_is_refused(client, provider, pool):
    provider.user.pop("email")
    callback = await _to_callback(client)
    sessions_before = await _sessions(pool)
    refused = await client.get(callback)
    assert refused.status_code == 403 and "'email'" in refused.json()["error"]["message"]
    assert await _sessions(pool) == sessions_before


async def test_a_browser_is_shown_why_sign_in_failed_with_a_way_to_try_again(
        client, provider, pool):
    callback = await _to_callback(client)
    denied = callback.split("?")[0] + "?error=access_denied&state=" + \
        parse_qs(urlsplit(callback).query)["state"][0]
    sessions_before = await _sessions(pool)
    page = await client.get(denied, headers={"accept": "text/html,application/xhtml+xml"})
    assert page.status_code == 403 and page.headers["content-type"].startswith("text/html")
    assert "Sign-in failed" in page.text and "access_denied" in page.text
    assert 'href=\'/console/oidc/login\'' in page.text
    assert not any(c.startswith(f"{SESSION_COOKIE}=")
                   for c in page.headers.get_list("set-cookie"))
    assert await _sessions(pool) == sessions_before


async def test_without_a_provider_the_routes_say_so(migrated_url):
    async for client in _client(_settings(migrated_url)):
        assert (await client.get("/console/config")).json() == {"oidc_provider": None,
                                                                "oidc_logout_url": None}
        for path in ("/console/oidc/login", "/console/oidc/callback?code=c&state=s"):
            answer = await client.get(path)
            assert answer.status_code == 404
            assert answer.json()["error"]["code"] == "oidc_not_configured"


async def test_an_unreachable_provider_is_a_503_not_a_500(migrated_url):
    settings = _settings(migrated_url, oidc_issuer=f"http://127.0.0.1:{free_port()}",
                         oidc_client_id=CLIENT_ID)
    async for client in _client(settings):
        answer = await client.get("/console/oidc/login")
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "unavailable"


def test_an_issuer_needs_a_client_id_and_scopes_need_openid():
    with pytest.raises(ValueError, match="WAYSTATION_OIDC_CLIENT_ID"):
        Settings(oidc_issuer="https://idp.test")
    with pytest.raises(ValueError, match="oidc_scopes|WAYSTATION_OIDC_SCOPES"):
        Settings(oidc_issuer="https://idp.test", oidc_client_id="c", oidc_scopes="profile")

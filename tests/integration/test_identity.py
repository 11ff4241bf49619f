"""Identity for production: identity-provider tokens through a JWKS a local HTTP server
serves (keys the test generates), and API keys."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
import pytest
import pytest_asyncio
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from tests.helpers import eventually
from waystation.api.app import create_app
from waystation.api.auth import issue_token
from waystation.api.identity import IdentityProvider
from waystation.settings import Settings

SECRET = "identity-secret-0123456789-0123456789-abcdef"
AUDIENCE, ISSUER = "waystation", "https://idp.test/"


class Jwks:
    """The identity provider's keys, served as a JWKS by a real HTTP server."""

    def __init__(self) -> None:
        self.private: dict[str, Any] = {}
        self.public_jwks: list[dict[str, Any]] = []
        self.fetches = 0

    def add(self, kid: str, alg: str) -> None:
        if alg == "RS256":
            key: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
        else:
            key = ec.generate_private_key(ec.SECP256R1())
            jwk = json.loads(ECAlgorithm.to_jwk(key.public_key()))
        self.private[kid] = (key, alg)
        self.public_jwks.append({**jwk, "kid": kid, "alg": alg, "use": "sig"})

    def token(self, kid: str, *, sub: str = "ida", aud: str = AUDIENCE, iss: str = ISSUER,
              exp_in: float = 300, signing_kid: str | None = None, **extra: Any) -> str:
        key, alg = self.private[signing_kid or kid]
        now = int(time.time())
        claims = {"sub": sub, "aud": aud, "iss": iss, "iat": now, "exp": now + exp_in, **extra}
        return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})


@pytest.fixture
def jwks() -> Iterator[tuple[Jwks, str]]:
    keys = Jwks()
    keys.add("rsa-1", "RS256")
    keys.add("ec-1", "ES256")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            keys.fetches += 1
            body = json.dumps({"keys": keys.public_jwks}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield keys, f"http://127.0.0.1:{server.server_port}/.well-known/jwks.json"
    finally:
        server.shutdown()
        server.server_close()


@pytest_asyncio.fixture
async def api(migrated_url, jwks, dev_env) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(database_url=migrated_url, jwt_secret=SECRET, jwks_url=jwks[1],
                        jwt_audience=AUDIENCE, jwt_issuer=ISSUER, jwt_leeway_seconds=30,
                        temporal_address=dev_env.client.service_client.config.target_host)
    app = create_app(settings)
    # As configured, but without the 30 s between refetches, so rotation is seen at once.
    app.state.identity_provider = IdentityProvider(
        jwks[1], audience=AUDIENCE, issuer=ISSUER, leeway_seconds=30,
        refetch_cooldown_seconds=0)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://localhost") as client:
            yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def group_count(pool) -> int:
    async with pool.acquire() as conn:
        return await conn.fetchval("SELECT count(*) FROM groups")


async def test_identity_provider_tokens(api, jwks, pool):
    keys = jwks[0]
    sub = f"ida-{uuid.uuid4().hex[:6]}"
    for kid in ("rsa-1", "ec-1"):
        created = await api.post("/groups", json={"name": kid},
                                 headers=bearer(keys.token(kid, sub=sub)))
        assert created.status_code == 201, created.text
        assert created.json()["created_by"] == sub
    # Inside the clock leeway (30 s) an expired token still passes.
    late = await api.get("/groups", headers=bearer(keys.token("rsa-1", sub=sub, exp_in=-10)))
    assert late.status_code == 200 and len(late.json()["groups"]) == 2
    # The service role is only for tokens this installation signs.
    claimed = await api.get("/groups", headers=bearer(keys.token("rsa-1", sub=sub,
                                                                 role="service")))
    assert len(claimed.json()["groups"]) == 2
    # HS256 dev tokens still work beside them.
    dev = await api.get("/groups", headers=bearer(issue_token(SECRET, sub)))
    assert dev.status_code == 200 and len(dev.json()["groups"]) == 2

    other = Jwks()
    other.add("rsa-1", "RS256")  # a key the provider never published, under a known kid
    refusals = {
        "wrong audience": (keys.token("rsa-1", aud="someone-else"), "invalid_token"),
        "wrong issuer": (keys.token("ec-1", iss="https://evil.test/"), "invalid_token"),
        "expired": (keys.token("rsa-1", exp_in=-120), "token_expired"),
        "forged": (other.token("rsa-1"), "invalid_token"),
        "unknown kid": (keys.token("nope", signing_kid="rsa-1"), "invalid_token"),
        "no audience": (jwt.encode({"sub": "x", "iss": ISSUER, "exp": time.time() + 60},
                                   keys.private["rsa-1"][0], algorithm="RS256",
                                   headers={"kid": "rsa-1"}), "invalid_token"),
    }
    before = await group_count(pool)
    for name, (token, code) in refusals.items():
        response = await api.post("/groups", json={"name": "x"}, headers=bearer(token))
        assert response.status_code == 401, (name, response.text)
        assert response.json()["error"]["code"] == code, name
    assert await group_count(pool) == before

    # A key the provider publishes later (rotation) is fetched when a token names it.
    keys.add("rsa-2", "RS256")
    rotated = await api.get("/groups", headers=bearer(keys.token("rsa-2", sub=sub)))
    assert rotated.status_code == 200


async def test_api_keys_act_as_their_user_or_group_member(api, pool):
    alice, bob = (f"{n}-{uuid.uuid4().hex[:6]}" for n in ("alice", "bob"))
    group = (await api.post("/groups", json={"name": "Svc"},
                            headers=bearer(issue_token(SECRET, alice)))).json()
    await api.post(f"/groups/{group['group_id']}/members", json={"user": bob, "role": "approver"},
                   headers=bearer(issue_token(SECRET, alice)))

    made = await api.post("/api-keys", json={"name": "ci"},
                          headers=bearer(issue_token(SECRET, alice)))
    assert made.status_code == 201, made.text
    key = made.json()["key"]
    assert key.startswith("wsk_") and made.json()["acts_as"] == alice
    as_alice = await api.get("/groups", headers=bearer(key))
    assert [g["group_id"] for g in as_alice.json()["groups"]] == [group["group_id"]]
    listed = (await api.get("/api-keys", headers=bearer(issue_token(SECRET, alice)))).json()
    assert [k["key_id"] for k in listed["api_keys"]] == [made.json()["key_id"]]
    assert "key" not in listed["api_keys"][0]
    async with pool.acquire() as conn:
        stored = await conn.fetchval("SELECT secret_hash FROM api_keys WHERE id = $1",
                                     uuid.UUID(made.json()["key_id"]))
    assert key.rsplit("_", 1)[1] not in stored  # only a hash is kept

    group_key = await api.post("/api-keys", headers=bearer(issue_token(SECRET, alice)), json={
        "name": "bot", "group_id": group["group_id"]})
    assert group_key.status_code == 201, group_key.text
    principal = group_key.json()["acts_as"]
    assert principal.startswith("apikey:")
    detail = (await api.get(f"/groups/{group['group_id']}",
                            headers=bearer(group_key.json()["key"]))).json()
    assert {m["user"]: m["role"] for m in detail["members"]}[principal] == "approver"

    # Refusals write nothing.
    async with pool.acquire() as conn:
        before = await conn.fetchval("SELECT count(*) FROM api_keys")
    for body, status in (({"name": "x", "group_id": group["group_id"]}, 403),
                         ({"name": "x", "group_id": str(uuid.uuid4())}, 404),
                         ({"name": "x", "group_id": group["group_id"], "role": "owner"}, 422),
                         ({"name": "x", "role": "approver"}, 422), ({"name": ""}, 422)):
        response = await api.post("/api-keys", json=body, headers=bearer(issue_token(SECRET, bob)))
        assert response.status_code == status, (body, response.text)
    tampered = key[:-1] + ("A" if key[-1] != "A" else "B")
    for bad in (tampered, "wsk_nothing", "wsk_" + uuid.uuid4().hex + "_x" * 10):
        response = await api.post("/groups", json={"name": "x"}, headers=bearer(bad))
        assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_token"
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM api_keys") == before

    # Revoked: refused at once; a group key leaves its group.
    key_id = group_key.json()["key_id"]
    assert (await api.delete(f"/api-keys/{key_id}",
                             headers=bearer(issue_token(SECRET, bob)))).status_code == 404
    assert (await api.delete(f"/api-keys/{key_id}",
                             headers=bearer(issue_token(SECRET, alice)))).status_code == 204
    assert (await api.get("/groups", headers=bearer(group_key.json()["key"]))).status_code == 401
    members = (await api.get(f"/groups/{group['group_id']}",
                             headers=bearer(issue_token(SECRET, alice)))).json()["members"]
    assert principal not in {m["user"] for m in members}
    assert (await api.delete(f"/api-keys/{key_id}",
                             headers=bearer(issue_token(SECRET, alice)))).status_code == 404


async def test_erasure_cuts_off_identity_provider_tokens_too(api, jwks):
    """A provider's token is signed elsewhere and cannot be revoked there: the erasure's
    cut-off refuses those issued before it, and one with no `iat` (it cannot show it is
    newer); a token issued after it (the same `sub`, in a later second) counts."""
    keys = jwks[0]
    sub = f"ida-{uuid.uuid4().hex[:6]}"
    before = keys.token("rsa-1", sub=sub)
    undated = jwt.encode({"sub": sub, "aud": AUDIENCE, "iss": ISSUER,
                          "exp": int(time.time()) + 300}, keys.private["ec-1"][0],
                         algorithm="ES256", headers={"kid": "ec-1"})
    for token in (before, undated):
        assert (await api.get("/groups", headers=bearer(token))).status_code == 200
    erased = await api.post("/admin/erasure", json={"user": sub},
                            headers=bearer(issue_token(SECRET, "ops", role="service")))
    assert erased.status_code == 202, erased.text
    for token in (before, undated):
        refused = await api.get("/groups", headers=bearer(token))
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"]["code"] == "token_revoked"

    async def a_later_token_counts() -> bool:
        later = await api.get("/groups", headers=bearer(keys.token("rsa-1", sub=sub)))
        return later.status_code == 200
    await eventually(a_later_token_counts, timeout=3)

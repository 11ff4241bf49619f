"""A real, local OpenID Connect provider for tests: discovery, an `/authorize` that approves at
once (redirecting back with a code), `/token` (checking the PKCE verifier, the redirect URI and
the client's secret) that answers an RS256 ID token signed with a key generated here, and
`/jwks`. Tests spoil the ID token through `id_token_claims` and `sign_with_foreign_key`."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

KID = "stub-key-1"


@dataclass
class OidcStub:
    issuer: str
    client_id: str
    client_secret: str | None
    key: Any = field(default_factory=lambda: rsa.generate_private_key(65537, 2048))
    # Claims over (or beside) the ones a correct provider sends; None drops a claim.
    id_token_claims: dict[str, Any] = field(default_factory=dict)
    sign_with_foreign_key: bool = False
    user: dict[str, Any] = field(default_factory=lambda: {
        "sub": "248289761001", "email": "ida@example.test", "preferred_username": "ida"})
    # code -> what /authorize was asked, for /token to check.
    grants: dict[str, dict[str, str]] = field(default_factory=dict)
    token_requests: int = 0

    def discovery(self) -> dict[str, Any]:
        return {"issuer": self.issuer, "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token", "jwks_uri": f"{self.issuer}/jwks",
                "response_types_supported": ["code"], "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic"],
                "end_session_endpoint": f"{self.issuer}/logout"}

    def jwks(self) -> dict[str, Any]:
        jwk = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**jwk, "kid": KID, "alg": "RS256", "use": "sig"}]}

    def authorize(self, query: dict[str, str]) -> str:
        """Where /authorize sends the browser: back, with a fresh code."""
        assert query["response_type"] == "code" and query["client_id"] == self.client_id
        assert query["code_challenge_method"] == "S256" and "openid" in query["scope"].split()
        code = secrets.token_urlsafe(24)
        self.grants[code] = query
        return f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"

    def token(self, form: dict[str, str], authorization: str | None) -> tuple[int, dict]:
        self.token_requests += 1
        grant = self.grants.pop(form.get("code", ""), None)  # a code works once
        if grant is None or form.get("redirect_uri") != grant["redirect_uri"]:
            return 400, {"error": "invalid_grant"}
        challenge = base64.urlsafe_b64encode(
            hashlib.sha256(form.get("code_verifier", "").encode()).digest()).rstrip(b"=")
        if challenge.decode() != grant["code_challenge"]:
            return 400, {"error": "invalid_grant", "error_description": "PKCE"}
        if self.client_secret is not None:
            expected = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode())
            if authorization != f"Basic {expected.decode()}":
                return 401, {"error": "invalid_client"}
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": self.client_id, "iat": now, "exp": now + 300,
                  "nonce": grant["nonce"], **self.user, **self.id_token_claims}
        key = rsa.generate_private_key(65537, 2048) if self.sign_with_foreign_key else self.key
        id_token = jwt.encode({k: v for k, v in claims.items() if v is not None}, key,
                              algorithm="RS256", headers={"kid": KID})
        return 200, {"access_token": secrets.token_urlsafe(16), "token_type": "Bearer",
                     "expires_in": 300, "id_token": id_token}


@contextmanager
def oidc_provider(client_id: str, client_secret: str | None = None) -> Iterator[OidcStub]:
    """An OIDC provider stub listening on a free local port until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    stub = OidcStub(f"http://127.0.0.1:{server.server_port}", client_id, client_secret)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            url = urlsplit(self.path)
            if url.path == "/.well-known/openid-configuration":
                self._json(200, stub.discovery())
            elif url.path == "/jwks":
                self._json(200, stub.jwks())
            elif url.path == "/authorize":
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                self.send_response(302)
                self.send_header("location", stub.authorize(query))
                self.send_header("content-length", "0")
                self.end_headers()
            else:
                self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            length = int(self.headers.get("content-length", "0"))
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            if urlsplit(self.path).path != "/token":
                self._json(404, {"error": "not_found"})
                return
            self._json(*stub.token(form, self.headers.get("authorization")))

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server.RequestHandlerClass = Handler
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()

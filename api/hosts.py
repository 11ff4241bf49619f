"""Where a request may come from: the Host it names (every route) and the browser Origin it
carries (`/mcp`, as the MCP transport asks).

DNS rebinding: a page on `rebind.attacker.example` whose name the attacker then points at
127.0.0.1 makes the victim's browser send requests to this server that are same-origin for the
page, so it reads the answers. They still carry the attacker's name in `Host`, which is why a
server must answer only to the names it is served under (WAYSTATION_ALLOWED_HOSTS).

Plain ASGI (not BaseHTTPMiddleware), so streamed responses pass through untouched.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from waystation.api.errors import error_response


class HostAllowList:
    """`api.example.com` (any port), `api.example.com:8443` (that port), `.example.com` (it
    and its subdomains), `[::1]`, `*` (any name)."""

    def __init__(self, patterns: list[str]) -> None:
        self.any = "*" in patterns
        self.patterns = [split_host(p.lower()) for p in patterns if p != "*"]

    def allows(self, host: str | None) -> bool:
        if self.any:
            return True
        if not host:
            return False
        name, port = split_host(host.lower())
        return any((name == allowed or (allowed.startswith(".") and
                                        (name == allowed[1:] or name.endswith(allowed))))
                   and (allowed_port is None or port == allowed_port)
                   for allowed, allowed_port in self.patterns)


def split_host(host: str) -> tuple[str, str | None]:
    """(name, port): `[::1]:8000` → (`[::1]`, `8000`), `localhost` → (`localhost`, None)."""
    if host.startswith("["):
        name, _, rest = host.partition("]")
        return name + "]", rest[1:] if rest.startswith(":") else None
    name, colon, port = host.partition(":")
    return name, port if colon else None


PROBE_PATHS = frozenset({"/healthz", "/livez", "/readyz"})


class TrustedHosts:
    """421 in the API's error shape for a request whose Host is not one of the allowed names,
    before anything else reads it (credentials, limits, the route)."""

    def __init__(self, app: ASGIApp, *, allowed: list[str]) -> None:
        self.app = app
        self.allowed = HostAllowList(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Health probes name whatever address they reach (Kubernetes' httpGet sends the pod's
        # IP as Host), and their answers say nothing of anyone: a rebound page learns nothing.
        if scope["type"] not in ("http", "websocket") or scope["path"] in PROBE_PATHS:
            await self.app(scope, receive, send)
            return
        host = Headers(scope=scope).get("host")
        if self.allowed.allows(host):
            await self.app(scope, receive, send)
            return
        # 421 Misdirected Request: this server is not configured to answer for that name.
        response = error_response(421, "host_not_allowed",
                                  f"this server does not answer to host {host!r}",
                                  details=[{"host": host}])
        await response(scope, receive, send)


def origin_allowed(origin: str | None, host: str | None, allowed: list[str]) -> bool:
    """No Origin (a non-browser client), the request's own origin (the console on any of
    its allowed names), or one of `allowed` (`*` allows every origin)."""
    if origin is None:
        return True
    origin = origin.rstrip("/").lower()
    if "*" in allowed or origin in {a.lower() for a in allowed}:
        return True
    parts = urlsplit(origin)
    return host is not None and parts.scheme in ("http", "https") \
        and parts.netloc == host.lower()

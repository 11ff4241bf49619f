"""Security headers on every response, and a Content-Security-Policy on every HTML one.

The API serves JSON, event streams, artifacts and a few HTML pages (the graph picture, the
OpenAPI docs). None of them needs to be framed, sniffed or to leak its URL in a Referer; HTML
gets a CSP that allows only what that page loads: the graph picture needs inline styles and
data: images, the docs pages Swagger UI / ReDoc from their CDN and an inline start-up script.

Plain ASGI (not BaseHTTPMiddleware), so streamed responses pass through untouched.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=(), payment=()"),
    # Ignored by browsers over plain HTTP; binding once served over HTTPS.
    (b"strict-transport-security", b"max-age=31536000; includeSubDomains"),
)
HTML_CSP = ("default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; "
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
# The graph picture may be framed by the API's own pages (the web console's mobile-run page).
SAME_ORIGIN_FRAME_HEADERS = {
    "X-Frame-Options": "SAMEORIGIN",
    "Content-Security-Policy": HTML_CSP.replace("frame-ancestors 'none'", "frame-ancestors 'self'"),
}
DOCS_CDN = "https://cdn.jsdelivr.net"
DOCS_CSP = (f"default-src 'none'; script-src 'unsafe-inline' {DOCS_CDN}; "
            f"style-src 'unsafe-inline' {DOCS_CDN} https://fonts.googleapis.com; "
            "font-src https://fonts.gstatic.com; img-src 'self' data: https:; "
            f"connect-src 'self'; worker-src blob:; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'")
DOCS_PATHS = ("/docs", "/redoc", "/docs/oauth2-redirect")


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp = (DOCS_CSP if scope["path"] in DOCS_PATHS else HTML_CSP).encode()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [h for h in HEADERS if h[0] not in present]
                content_type = next((v for n, v in headers if n.lower() == b"content-type"), b"")
                # A page that states its own policy (the web console, the framable graph
                # picture) keeps it: two policies would both be enforced.
                if content_type.startswith(b"text/html") and \
                        b"content-security-policy" not in present:
                    headers.append((b"content-security-policy", csp))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)

"""The web console: its page, its static files, and browser sign-in.

`waystation console-link` prints a one-time URL; GET /console/login spends its code for an
HttpOnly session cookie and redirects to `/`, so the code never stays in the address bar or
the history. The console then calls the same JSON API as everybody else, with the cookie (and
the CSRF token from /console/session on every change). These routes are browser plumbing, not
part of the JSON API, so they stay out of the OpenAPI schema.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import BaseModel

from api.auth import SESSION_COOKIE, exchange_login_code
from api.deps import Conn, CurrentUser, RegistryDep, SettingsDep
from persistence import console_sessions

router = APIRouter(include_in_schema=False)

STATIC_PACKAGE = "api.console"
STATIC_PATH = "/console/static"
# The page loads only its own scripts and styles; the mobile graph picture is a same-origin
# frame; screenshots are same-origin images.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-src 'self'; "
                               "object-src 'none'; base-uri 'none'; form-action 'self'; "
                               "frame-ancestors 'none'",
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
# The sign-in answer must not be cached, and the code must not leak in a Referer.
LOGIN_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}

LoginCode = Annotated[str, Query(min_length=20, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")]


class ConsoleSessionView(BaseModel):
    """Who the console is signed in as, and what its pages need to know."""

    user: str
    role: Literal["user", "service"]
    csrf_token: str | None
    temporal_ui_url: str
    temporal_namespace: str
    kinds: list[str]


@cache
def _index_html() -> str:
    return (resources.files(STATIC_PACKAGE) / "static" / "index.html").read_text()


def static_directory() -> str:
    return str(resources.files(STATIC_PACKAGE) / "static")


@router.get("/", response_class=HTMLResponse)
async def console_page() -> HTMLResponse:
    """The console (a single page; it routes by the URL fragment)."""
    return HTMLResponse(_index_html(), headers=PAGE_HEADERS)


@router.get("/console/login")
async def console_login(code: LoginCode, conn: Conn, settings: SettingsDep) -> Response:
    """Spend a one-time code for a session cookie, then go to the console."""
    ttl = settings.console_session_hours * 3600
    session = await exchange_login_code(conn, code, ttl_seconds=ttl)
    response = RedirectResponse("/", status_code=303, headers=LOGIN_HEADERS)
    response.set_cookie(SESSION_COOKIE, session.session_id, max_age=int(ttl), path="/",
                        httponly=True, samesite="lax",
                        secure=settings.console_cookie_is_secure)
    return response


@router.post("/console/logout", status_code=204)
async def console_logout(request: Request, user: CurrentUser, conn: Conn) -> Response:
    """End the browser's session (a bearer caller has none to end)."""
    if (session_id := request.cookies.get(SESSION_COOKIE)) is not None:
        await console_sessions.revoke_session(conn, session_id)
    response = Response(status_code=204)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/console/session", response_model=ConsoleSessionView)
async def console_session(request: Request, user: CurrentUser, conn: Conn,
                          settings: SettingsDep, registry: RegistryDep) -> ConsoleSessionView:
    """The signed-in user, the CSRF token for changes, and where the Temporal Web UI is."""
    session = None
    if "authorization" not in request.headers and (
            session_id := request.cookies.get(SESSION_COOKIE)) is not None:
        session = await console_sessions.get_session(conn, session_id)
    return ConsoleSessionView(
        user=user.name, role=user.role, csrf_token=session.csrf_token if session else None,
        temporal_ui_url=settings.temporal_ui_base,
        temporal_namespace=settings.temporal_namespace, kinds=sorted(registry.names))

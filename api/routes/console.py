"""The web console: its page, its static files, and browser sign-in.

`waystation console-link` prints a one-time URL; GET /console/login spends its code for an
HttpOnly session cookie and redirects to `/`, so the code never stays in the address bar or
the history. With an identity provider configured (WAYSTATION_OIDC_ISSUER), /console/oidc/login
and its callback sign in the OpenID Connect way instead (see waystation.api.oidc) and end the same
way: a session cookie and a redirect to `/`. The console then calls the same JSON API as everybody
else, with the cookie (and the CSRF token from /console/session on every change). These routes
are browser plumbing, not part of the JSON API, so they stay out of the OpenAPI schema.
"""

from __future__ import annotations

import html
from functools import cache
from importlib import resources
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from waystation.api.auth import SESSION_COOKIE, NewSession
from waystation.api.console_schemas import ConsoleConfig, ConsoleSessionView
from waystation.api.deps import AuthenticatorConn, Conn, CurrentUser, RegistryDep, SettingsDep
from waystation.api.errors import ApiError
from waystation.api.oidc import (
    CALLBACK_PATH,
    FLOW_COOKIE,
    FLOW_PATH,
    FLOW_SECONDS,
    OidcClient,
    SignInFlow,
)
from waystation.api.services import console
from waystation.settings import Settings

router = APIRouter(include_in_schema=False)

STATIC_PACKAGE = "waystation.api.console"
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
# What a provider sends back is opaque, but bounded (RFC 6749 leaves the size to the provider).
ProviderCode = Annotated[str | None, Query(min_length=1, max_length=4096)]
ProviderState = Annotated[str, Query(min_length=1, max_length=200)]
ProviderError = Annotated[str | None, Query(max_length=200, pattern=r"^[\x20-\x7e]*$")]


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
async def console_login(code: LoginCode, conn: AuthenticatorConn,
                        settings: SettingsDep) -> Response:
    """Spend a one-time code for a session cookie, then go to the console."""
    return _signed_in(await console.sign_in_with_code(conn, code, settings=settings), settings)


def _signed_in(session: NewSession, settings: Settings) -> Response:
    """Set the session cookie and go to the console; a 303 so the browser GETs `/` and the
    sign-in URL (with its code) is replaced in the history."""
    ttl = settings.console_session_hours * 3600
    response = RedirectResponse("/", status_code=303, headers=LOGIN_HEADERS)
    response.set_cookie(SESSION_COOKIE, session.session_id, max_age=int(ttl), path="/",
                        httponly=True, samesite="lax",
                        secure=settings.console_cookie_is_secure)
    return response


@router.get("/console/config", response_model=ConsoleConfig)
async def console_config(request: Request) -> ConsoleConfig:
    """Which sign-in the sign-in page offers besides console links."""
    oidc: OidcClient | None = request.app.state.oidc
    if oidc is None:
        return ConsoleConfig(oidc_provider=None)
    try:
        logout = await oidc.logout_url(request.app.state.settings.console_base + "/")
    except ApiError:  # the provider is unreachable now: signing out here still works
        logout = None
    return ConsoleConfig(oidc_provider=oidc.provider_name, oidc_logout_url=logout)


def _oidc(request: Request) -> OidcClient:
    oidc: OidcClient | None = request.app.state.oidc
    if oidc is None:
        raise ApiError(404, "oidc_not_configured", "no identity provider is configured "
                                                   "(WAYSTATION_OIDC_ISSUER); sign in with "
                                                   "`waystation console-link`")
    return oidc


@router.get(f"{FLOW_PATH}/login")
async def console_oidc_login(request: Request, settings: SettingsDep) -> Response:
    """Send the browser to the identity provider, remembering the flow in a signed cookie."""
    flow = SignInFlow.fresh()
    target = await _oidc(request).authorization_url(flow, settings.console_base + CALLBACK_PATH)
    response = RedirectResponse(target, status_code=302, headers=LOGIN_HEADERS)
    # Lax: the provider's redirect back is a top-level GET from another site.
    response.set_cookie(FLOW_COOKIE, flow.seal(settings.jwt_secret), max_age=FLOW_SECONDS,
                        path=FLOW_PATH, httponly=True, samesite="lax",
                        secure=settings.console_cookie_is_secure)
    return response


@router.get(CALLBACK_PATH)
async def console_oidc_callback(request: Request, conn: AuthenticatorConn, settings: SettingsDep,
                                state: ProviderState, code: ProviderCode = None,
                                error: ProviderError = None) -> Response:
    """Finish a provider sign-in: check the state, spend the code, verify the ID token,
    then start a console session; any mismatch is a 403 and signs nobody in (a browser is
    shown a page saying why, with a way to try again)."""
    try:
        oidc = _oidc(request)
        flow = SignInFlow.unseal(request.cookies.get(FLOW_COOKIE), settings.jwt_secret, state)
        if error is not None:
            raise ApiError(403, "oidc_failed",
                           f"the identity provider did not sign you in: {error}")
        if code is None:
            raise ApiError(422, "invalid_request", "query.code: Field required")
        user = await oidc.user_for_code(code, flow, settings.console_base + CALLBACK_PATH)
    except ApiError as refused:
        if "text/html" not in request.headers.get("accept", ""):
            raise
        return _sign_in_failed_page(refused)
    response = _signed_in(await console.sign_in(conn, user, settings=settings), settings)
    response.delete_cookie(FLOW_COOKIE, path=FLOW_PATH)
    return response


def _sign_in_failed_page(refused: ApiError) -> HTMLResponse:
    page = (f"<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<meta name=viewport content='width=device-width, initial-scale=1'>"
            f"<title>Sign-in failed · Waystation</title>"
            f"<link rel=stylesheet href='/console/static/console.css'></head><body>"
            f"<main class=signin-failed><h1>Sign-in failed</h1>"
            f"<p>{html.escape(refused.message)}.</p><p>Nobody was signed in.</p>"
            f"<p><a class=button href='{FLOW_PATH}/login'>Try again</a> · "
            f"<a href='/'>Back to the console</a></p></main></body></html>")
    response = HTMLResponse(page, status_code=refused.status, headers=LOGIN_HEADERS)
    response.delete_cookie(FLOW_COOKIE, path=FLOW_PATH)
    return response


@router.post("/console/logout", status_code=204)
async def console_logout(request: Request, user: CurrentUser, conn: Conn) -> Response:
    """End the browser's session (a bearer caller has none to end)."""
    await console.sign_out(conn, request.cookies.get(SESSION_COOKIE))
    response = Response(status_code=204)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/console/session", response_model=ConsoleSessionView)
async def console_session(request: Request, user: CurrentUser, conn: Conn,
                          settings: SettingsDep, registry: RegistryDep) -> ConsoleSessionView:
    """The signed-in user, the CSRF token for changes, and where the Temporal Web UI is."""
    # A caller signed in by its Authorization header needs no CSRF token, whatever cookie
    # it also sends: only the cookie's session has one.
    session_id = None if "authorization" in request.headers \
        else request.cookies.get(SESSION_COOKIE)
    return await console.session_view(conn, user, session_id, settings=settings,
                                      registry=registry)


@router.get(STATIC_PATH + "/kinds/{kind}/{page}.js")
async def kind_page(kind: str, page: str, registry: RegistryDep) -> Response:
    """A kind's console page (`ConsoleHooks.pages`), a JavaScript module served from the
    kind's package (it imports the console's modules as `../../dom.js`)."""
    module = next((p.module for k, p in registry.console_pages() if (k, p.name) == (kind, page)),
                  None)
    if module is None:
        raise ApiError(404, "not_found", f"no console page {page!r} of kind {kind!r}")
    return Response(module.read_text(), media_type="text/javascript",
                    headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"})


@router.get(STATIC_PATH + "/kinds/{kind}.js")
async def kind_section(kind: str, registry: RegistryDep) -> Response:
    """A kind's console section (`ConsoleHooks.module`), a JavaScript module served from
    the kind's package beside the console's own (so it imports them as `../dom.js`)."""
    module = registry.console_modules().get(kind)
    if module is None:
        raise ApiError(404, "not_found", f"no console section for kind {kind!r}")
    return Response(module.read_text(), media_type="text/javascript",
                    headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"})

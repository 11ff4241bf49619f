"""The console's sessions: signing a browser in (a one-time code, or a user the identity
provider vouched for), out, and what its pages need to know (api/routes/console.py sets the
cookies)."""

from __future__ import annotations

import asyncpg

from waystation.api.auth import NewSession, User, exchange_login_code, start_session
from waystation.api.console_schemas import ConsoleSessionView, KindPageView, RunFilterView
from waystation.persistence import console_sessions
from waystation.registry import Registry
from waystation.settings import Settings


def _ttl_seconds(settings: Settings) -> float:
    return settings.console_session_hours * 3600


async def sign_in_with_code(conn: asyncpg.Connection, code: str, *,
                            settings: Settings) -> NewSession:
    """Spend a one-time code for a fresh session; 401 for an unknown, used or expired code."""
    return await exchange_login_code(conn, code, ttl_seconds=_ttl_seconds(settings))


async def sign_in(conn: asyncpg.Connection, user_name: str, *, settings: Settings) -> NewSession:
    """A fresh session for a user the identity provider signed in."""
    return await start_session(
        conn, console_sessions.ConsoleIdentity(user_name=user_name, role="user"),
        ttl_seconds=_ttl_seconds(settings))


async def sign_out(conn: asyncpg.Connection, session_id: str | None) -> None:
    """End the browser's session, if it has one (ending it again changes nothing)."""
    if session_id is not None:
        await console_sessions.revoke_session(conn, session_id)


async def session_view(conn: asyncpg.Connection, user: User, session_id: str | None, *,
                       settings: Settings, registry: Registry) -> ConsoleSessionView:
    """Who is signed in, the session's CSRF token (`session_id` None: no session signed the
    caller in, so no token), where the Temporal Web UI is and the kinds' console parts."""
    session = await console_sessions.get_session(conn, session_id) \
        if session_id is not None else None
    return ConsoleSessionView(
        user=user.name, role=user.role, csrf_token=session.csrf_token if session else None,
        temporal_ui_url=settings.temporal_ui_base,
        temporal_namespace=settings.temporal_namespace, kinds=sorted(registry.names),
        kind_sections=sorted(registry.console_modules()),
        kind_pages=[KindPageView(kind=kind, name=page.name, title=page.title)
                    for kind, page in registry.console_pages()],
        run_filters=[RunFilterView(name=f.name, label=f.label, pattern=_html_pattern(f.pattern),
                                   placeholder=f.placeholder) for f in registry.run_filters()])


def _html_pattern(pattern: str | None) -> str | None:
    """An input's `pattern` matches the whole value already: without the anchors."""
    return pattern.removeprefix("^").removesuffix("$") if pattern is not None else None

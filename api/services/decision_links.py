"""Decision links from email: see the request, and decide it once, without a token.

The link itself is the credential: signed by this installation (a tampered one is refused
before the database is read), naming one person and one request, spent by its first decision,
and expiring. Every refusal is a 403 and writes nothing. The connection starts with the
authenticator's claims (it sees credentials only) and acts as the link's person once verified.
"""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

import asyncpg
from temporalio.client import Client

from waystation.api.auth import User
from waystation.api.errors import ApiError
from waystation.api.schemas import (
    DecisionLinkAnswer,
    DecisionLinkView,
    DecisionRequest,
    DecisionView,
)
from waystation.api.services.access import act_as
from waystation.api.services.decisions import decide
from waystation.contracts.decision_links import verify_link
from waystation.persistence import decision_mail as mail_repo
from waystation.persistence import gates as gates_repo
from waystation.persistence import runs as runs_repo
from waystation.persistence.decision_mail import LinkRow
from waystation.settings import Settings


async def show_link(conn: asyncpg.Connection, token: str, *,
                    settings: Settings) -> DecisionLinkView:
    """The request a mailed link is for, and whom it decides as."""
    link = await _usable_link(conn, settings.jwt_secret, token)
    await act_as(conn, User(name=link.user_name, via="link"))
    gate = await gates_repo.get_gate(conn, link.request_id)
    if gate is None:  # its run was erased: hidden, and deleted with the link later
        raise ApiError(403, "invalid_link", "this link is not valid")
    return DecisionLinkView(decide_as=link.user_name, expires_at=link.expires_at,
                            request=DecisionView.of(gate))


async def decide_by_link(conn: asyncpg.Connection, temporal: Client, token: str,
                         answer: DecisionLinkAnswer, *, settings: Settings) -> DecisionView:
    """Decide the link's request as its person; the link is spent by the decision."""
    link_id = _link_id(settings.jwt_secret, token)
    link = await mail_repo.claim_link(conn, link_id)
    if link is None:
        await _usable_link(conn, settings.jwt_secret, token)  # raises the precise refusal
        raise ApiError(403, "link_used", "this link has already been used")  # lost a race
    try:
        await act_as(conn, User(name=link.user_name, via="link"))
        gate = await gates_repo.get_gate(conn, link.request_id)
        run = await runs_repo.get_run(conn, gate.run_id) if gate else None
        if gate is None or run is None:  # its run was erased since the link was mailed
            raise ApiError(403, "invalid_link", "this link is not valid")
        return await decide(
            conn, temporal, User(name=link.user_name, via="link"), run, gate.checkpoint_name,
            DecisionRequest(decision=answer.decision, feedback=answer.feedback,
                            request_id=gate.id, digest=gate.digest),
            idempotency_key=f"link-{link.id}")
    except Exception:
        # Nothing was decided (refused, or no worker took it): the link may be used again.
        await mail_repo.release_link(conn, link.id)
        raise


def _link_id(secret: str, token: str) -> UUID:
    link_id = verify_link(secret, token)
    if link_id is None:
        raise ApiError(403, "invalid_link", "this link is not valid")
    return link_id


async def _usable_link(conn: asyncpg.Connection, secret: str, token: str) -> LinkRow:
    link = await mail_repo.get_link(conn, _link_id(secret, token))
    if link is None:
        raise ApiError(403, "invalid_link", "this link is not valid")
    if link.used_at is not None:
        raise ApiError(403, "link_used", "this link has already been used")
    if link.expires_at <= datetime.now(UTC):
        raise ApiError(403, "link_expired", "this link has expired")
    return link

"""Decision links from email: see the request, and decide it once, without a token.

The link itself is the credential: signed by this installation (a tampered one is refused
before the database is read), naming one person and one request, spent by its first decision,
and expiring. Every refusal is a 403 and writes nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Path

from api.auth import User
from api.deps import AuthenticatorConn, SettingsDep, TemporalClient, act_as
from api.errors import ERROR_RESPONSES, ApiError
from api.routes.decisions import take_decision
from api.schemas import DecisionLinkAnswer, DecisionLinkView, DecisionRequest, DecisionView
from contracts.decision_links import verify_link
from persistence import decision_mail as mail_repo
from persistence import gates as gates_repo
from persistence import runs as runs_repo
from persistence.decision_mail import LinkRow

router = APIRouter(prefix="/decide-link", tags=["decisions"])

Token = Annotated[str, Path(min_length=1, max_length=200)]


@router.get("/{token}", response_model=DecisionLinkView, responses={403: ERROR_RESPONSES[403]})
async def show_decision_link(token: Token, conn: AuthenticatorConn,
                             settings: SettingsDep) -> DecisionLinkView:
    """The request a mailed link is for, and whom it decides as."""
    link = await _usable_link(conn, settings.jwt_secret, token)
    await act_as(conn, User(name=link.user_name, via="link"))
    gate = await gates_repo.get_gate(conn, link.request_id)
    if gate is None:  # its run was erased: hidden, and deleted with the link later
        raise ApiError(403, "invalid_link", "this link is not valid")
    return DecisionLinkView(decide_as=link.user_name, expires_at=link.expires_at,
                            request=DecisionView.of(gate))


@router.post("/{token}", response_model=DecisionView)
async def decide_by_link(token: Token, body: DecisionLinkAnswer, conn: AuthenticatorConn,
                         settings: SettingsDep, temporal: TemporalClient) -> DecisionView:
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
        return await take_decision(
            conn, temporal, run, gate.checkpoint_name,
            DecisionRequest(decision=body.decision, feedback=body.feedback, request_id=gate.id,
                            digest=gate.digest),
            User(name=link.user_name, via="link"), idempotency_key=f"link-{link.id}")
    except Exception:
        # Nothing was decided (refused, or no worker took it): the link may be used again.
        await mail_repo.release_link(conn, link.id)
        raise


def _link_id(secret: str, token: str) -> UUID:
    link_id = verify_link(secret, token)
    if link_id is None:
        raise ApiError(403, "invalid_link", "this link is not valid")
    return link_id


async def _usable_link(conn: AuthenticatorConn, secret: str, token: str) -> LinkRow:
    link = await mail_repo.get_link(conn, _link_id(secret, token))
    if link is None:
        raise ApiError(403, "invalid_link", "this link is not valid")
    if link.used_at is not None:
        raise ApiError(403, "link_used", "this link has already been used")
    if link.expires_at <= datetime.now(UTC):
        raise ApiError(403, "link_expired", "this link has expired")
    return link

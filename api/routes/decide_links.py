"""Decision links from email: see the request, and decide it once, without a token (the link
is the credential; see api/services/decision_links.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from waystation.api.deps import AuthenticatorConn, SettingsDep, TemporalClient
from waystation.api.errors import ERROR_RESPONSES
from waystation.api.schemas import DecisionLinkAnswer, DecisionLinkView, DecisionView
from waystation.api.services import decision_links

router = APIRouter(prefix="/decide-link", tags=["decisions"])

Token = Annotated[str, Path(min_length=1, max_length=200)]


@router.get("/{token}", response_model=DecisionLinkView, responses={403: ERROR_RESPONSES[403]})
async def show_decision_link(token: Token, conn: AuthenticatorConn,
                             settings: SettingsDep) -> DecisionLinkView:
    """The request a mailed link is for, and whom it decides as."""
    return await decision_links.show_link(conn, token, settings=settings)


@router.post("/{token}", response_model=DecisionView)
async def decide_by_link(token: Token, body: DecisionLinkAnswer, conn: AuthenticatorConn,
                         settings: SettingsDep, temporal: TemporalClient) -> DecisionView:
    """Decide the link's request as its person; the link is spent by the decision."""
    return await decision_links.decide_by_link(conn, temporal, token, body, settings=settings)

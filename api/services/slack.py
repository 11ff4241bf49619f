"""Slack as a way in: who a Slack user is here, and deciding as them.

A Slack user is linked to a Waystation user by a one-time code (`/waystation link` answers
with a link holding it; opening it with a Waystation credential links them), or, where the team
chose it, by the e-mail address Slack confirmed, where Waystation's users are named by the
identity provider's verified e-mail (`link_by_email`). A click decides
through the one decide service (`decisions.decide`), as the linked user, bound to the request
and digest the message showed, so every rule (roles, quorum, delegation, a stale message)
holds as on `POST /runs/{id}/decisions/{checkpoint}`; every refusal comes before anything is
written. The connection starts with the authenticator's claims (a Slack user is known only by
Slack's signature) and acts as the linked user once found.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

import asyncpg
from pydantic import BaseModel, ValidationError
from temporalio.client import Client

from waystation.api.auth import User
from waystation.api.errors import ApiError
from waystation.api.schemas import DecisionRequest, DecisionView, SlackLinkView
from waystation.api.services.access import act_as
from waystation.api.services.decisions import decide, require_voter
from waystation.persistence import gates as gates_repo
from waystation.persistence import runs as runs_repo
from waystation.persistence import slack as slack_repo
from waystation.persistence import token_cutoffs
from waystation.persistence.claims import AUTHENTICATOR, set_claims
from waystation.persistence.models import GateRow, RunRow

NOT_LINKED = ApiError(403, "slack_not_linked",
                      "your Slack user is not linked to Waystation: type `/waystation link`")


class SlackActor(BaseModel):
    """Who clicked, as Slack's signed request says."""

    team_id: str
    slack_user: str


class SlackEmails(Protocol):
    """Where a Slack user's confirmed e-mail address comes from (api/protocols/slack/emails.py
    asks Slack); an `ApiError` to tell the person when there is none to believe."""

    # What else the person can do, added to each refusal (`/waystation link`, if offered).
    otherwise: str

    async def confirmed_email(self, actor: SlackActor) -> str: ...


class SlackChoice(BaseModel):
    """What a click (or a modal's submission) asks: an option of a request, as shown."""

    request_id: UUID
    option: str
    digest: str
    feedback: str | None = None
    answer: Any = None


def _code_hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


async def new_link_code(conn: asyncpg.Connection, actor: SlackActor, *,
                        ttl: timedelta) -> str:
    """A one-time code linking `actor` to whoever opens it with their credential in time."""
    code = secrets.token_urlsafe(32)
    await slack_repo.add_link_code(conn, _code_hash(code), actor.team_id, actor.slack_user,
                                   datetime.now(UTC) + ttl)
    return code


async def link(conn: asyncpg.Connection, user: User, code: str, *,
               api_key_id: UUID | None) -> SlackLinkView:
    """Link the code's Slack user to `user` (the code is spent); with an API key, the link
    ends when the key is revoked. 403 for an unknown, used or expired code, or the service
    role (a Slack user is a person)."""
    if user.is_service:
        raise ApiError(403, "not_allowed", "the service role cannot be linked to a Slack user")
    claimed = await slack_repo.claim_link_code(conn, _code_hash(code))
    if claimed is None:
        raise ApiError(403, "invalid_link", "this link is not valid, used or expired: type "
                                            "`/waystation link` in Slack for a new one")
    linked = await slack_repo.link_user(conn, *claimed, user.name, api_key_id)
    return SlackLinkView(team_id=claimed[0], slack_user=claimed[1], user=linked.user_name,
                         linked_at=linked.linked_at)


async def current_link(conn: asyncpg.Connection, actor: SlackActor) -> User | None:
    """The Waystation user `actor` is linked to; None when not linked, or linked before the
    user's access was ended (an erasure cuts their tokens off, and their links with them)."""
    found = await slack_repo.slack_user_of(conn, actor.team_id, actor.slack_user)
    if found is None:
        return None
    not_before = await token_cutoffs.tokens_not_before(conn, found.user_name)
    if not_before is not None and found.linked_at <= not_before:
        return None
    return User(name=found.user_name, via="slack")


async def linked_user(conn: asyncpg.Connection, actor: SlackActor, *,
                      emails: SlackEmails | None = None) -> User:
    """The Waystation user `actor` decides as (`current_link`); 403 when there is none.
    With `emails` (linking by e-mail chosen), an unlinked actor is linked by theirs."""
    user = await current_link(conn, actor)
    if user is not None:
        return user
    if emails is None:
        raise NOT_LINKED
    return await link_by_email(conn, actor, emails)


async def link_by_email(conn: asyncpg.Connection, actor: SlackActor,
                        emails: SlackEmails) -> User:
    """Link `actor` to the Waystation user their confirmed Slack e-mail address names (only
    where users are named by the identity provider's verified e-mail: the settings refuse
    the choice otherwise). That user must be someone here already (see `known_user`): an
    address names nobody by itself, and an erased user is nobody. No API key is behind such
    a link: it ends with the user's erasure, and a group's requests stop with membership.
    403 (nothing written) when Slack's address cannot be believed or names nobody."""
    email = await emails.confirmed_email(actor)
    user = User(name=email, via="slack")
    await act_as(conn, user)  # what is theirs, as they would see it
    known = await slack_repo.known_user(conn, email)
    await set_claims(conn, AUTHENTICATOR)  # the link may replace another's (a revoked key's)
    if not known:
        raise ApiError(403, "slack_email_unknown",
                       f"no Waystation user is named {email}: sign in to Waystation once "
                       f"(or be added to a group), then try again{emails.otherwise}")
    await slack_repo.link_user(conn, actor.team_id, actor.slack_user, email, None)
    return user


async def request_for(conn: asyncpg.Connection, actor: SlackActor, request_id: UUID, *,
                      emails: SlackEmails | None = None) -> tuple[User, GateRow, RunRow]:
    """The linked user (linked now by e-mail, given `emails`), and the request with its run
    if they may vote on it (a modal is opened only then): 403 otherwise, 404 for a request
    they may not see."""
    user = await linked_user(conn, actor, emails=emails)
    await act_as(conn, user)
    gate = await gates_repo.get_gate(conn, request_id)
    run = await runs_repo.get_run(conn, gate.run_id) if gate is not None else None
    if gate is None or run is None:
        raise ApiError(404, "request_not_found", "that request is not one you can see")
    await require_voter(conn, user, run, gate, f"decide {gate.checkpoint_name!r}")
    return user, gate, run


async def decide_from_slack(conn: asyncpg.Connection, temporal: Client, actor: SlackActor,
                            choice: SlackChoice) -> DecisionView:
    """Vote as the linked user on the request the message showed."""
    user, gate, run = await request_for(conn, actor, choice.request_id)
    return await vote(conn, temporal, user, gate, run, choice)


async def vote(conn: asyncpg.Connection, temporal: Client, user: User, gate: GateRow,
               run: RunRow, choice: SlackChoice) -> DecisionView:
    """Vote as `user` on `gate`, found by `request_for` on this connection."""
    try:
        request = DecisionRequest(decision=choice.option, feedback=choice.feedback or None,
                                  request_id=gate.id, digest=choice.digest,
                                  answer=choice.answer)
    except ValidationError as error:
        raise ApiError(422, "invalid_request", error.errors()[0]["msg"]) from error
    return await decide(conn, temporal, user, run, gate.checkpoint_name, request)

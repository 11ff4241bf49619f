"""The Slack endpoints: each verifies the request, answers Slack at once (within its 3 s),
and does the work after the answer (FastAPI background tasks): deciding, opening a modal,
answering with an ephemeral message. Those replies go straight to Slack's Web API from the
API, not through the durable notification workflows: an ephemeral message or a modal is for
the person at the screen now, and a modal's trigger expires in 3 s. What a decision changes
reaches every message durably, through the recorder (activities/slack/channel.py)."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import timedelta
from typing import Annotated, Any
from urllib.parse import parse_qs

import asyncpg
from fastapi import APIRouter, BackgroundTasks, Path, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from temporalio.client import Client

from waystation.activities.slack.blocks import DECIDE_ACTION, ButtonValue
from waystation.activities.slack.web_api import SlackConfig, SlackError, SlackWebApi
from waystation.api.api_keys import api_key_id
from waystation.api.auth import User, bearer_token
from waystation.api.deps import AuthenticatorConn, CurrentUser, SettingsDep, pooled_connection
from waystation.api.errors import ERROR_RESPONSES, ApiError, as_api_error
from waystation.api.protocols.slack.emails import RecentAnswers, SlackDirectory
from waystation.api.protocols.slack.modals import (
    CALLBACK_ID,
    FEEDBACK_BLOCK,
    ModalContext,
    decision_modal,
    needs_modal,
    read_submission,
)
from waystation.api.protocols.slack.verify import verified
from waystation.api.rate_limits import Limiter
from waystation.api.schemas import SlackLinkView
from waystation.api.services import slack as slack_service
from waystation.api.services.slack import SlackActor, SlackChoice, SlackEmails
from waystation.api.temporal_gateway import TemporalGateway
from waystation.persistence.claims import AUTHENTICATOR
from waystation.settings import Settings

log = logging.getLogger(__name__)
router = APIRouter(prefix="/slack", tags=["slack"])
# A modal's submission is answered within Slack's 3 s: a decision taking longer completes
# after the answer (the modal closes; a refusal then comes as an ephemeral message).
SUBMISSION_WAIT_SECONDS = 2.0
LINK_COMMAND = "link"

Code = Annotated[str, Path(min_length=16, max_length=200)]


def _web_api(request: Request, settings: Settings) -> SlackWebApi:
    api = getattr(request.app.state, "slack_web_api", None)
    if api is None:
        if settings.slack_bot_token is None:
            raise ApiError(404, "not_found", "Slack is not configured here")
        api = request.app.state.slack_web_api = SlackWebApi(SlackConfig(
            bot_token=settings.slack_bot_token.get_secret_value(),
            api_url=settings.slack_api_url))
    return api


def _emails(request: Request, api: SlackWebApi, settings: Settings) -> SlackEmails | None:
    """Where an unlinked Slack user's confirmed e-mail comes from, if the team links by it."""
    if settings.slack_link_by == "command":
        return None
    otherwise = "; or type `/waystation link`" if settings.slack_link_by == "both" else ""
    return _directory(request, api, otherwise=otherwise)


def _directory(request: Request, api: SlackWebApi, *, otherwise: str = "") -> SlackDirectory:
    """Slack's users.info, asked at most once a few seconds per Slack user by this process
    (its answers shared by every request), each ask counted against the Slack user's writes."""
    answers = getattr(request.app.state, "slack_answers", None)
    if answers is None:
        answers = request.app.state.slack_answers = RecentAnswers()
    return SlackDirectory(api, answers, request.app.state.limiter, otherwise=otherwise)


def _secret(settings: Settings) -> str | None:
    secret = settings.slack_signing_secret
    return secret.get_secret_value() if secret is not None else None


async def _tell(api: SlackWebApi, channel: str | None, user: str, text: str) -> None:
    """An ephemeral message to `user` where they clicked; lost if Slack does not take it (the
    person clicks again)."""
    if channel is None:
        return
    try:
        await api.call("chat.postEphemeral", channel=channel, user=user, text=text)
    except SlackError as error:
        log.warning("ephemeral message to %s in %s not sent: %s", user, channel, error)


def _refusal(error: ApiError) -> str:
    return f":no_entry: Not done: {error.message}"


@router.post("/commands", include_in_schema=False)
async def slack_command(request: Request, settings: SettingsDep, conn: AuthenticatorConn,
                        background: BackgroundTasks) -> Response:
    """`/waystation link`: an ephemeral message with a one-time link to the API, or (linking
    by e-mail chosen) the link made by the Slack user's confirmed e-mail address."""
    slack = await verified(request, conn, _secret(settings))
    form = {k: v[0] for k, v in parse_qs(slack.body.decode()).items()}
    if slack.repeated:
        return Response(status_code=200)
    if form.get("text", "").strip().lower() != LINK_COMMAND:
        return JSONResponse({"response_type": "ephemeral",
                             "text": "Usage: `/waystation link` links your Slack user to "
                                     "your Waystation user."})
    actor = SlackActor(team_id=form.get("team_id", ""), slack_user=form.get("user_id", ""))
    if not actor.team_id or not actor.slack_user:
        raise ApiError(422, "invalid_request", "team_id and user_id are required")
    api, channel = _web_api(request, settings), form.get("channel_id")
    if settings.slack_link_by == "command":
        text = await _link_offered(conn, actor, settings)
        background.add_task(_tell, api, channel, actor.slack_user, text)
    else:
        background.add_task(_link_by_email, request, settings, api, actor, channel)
    return Response(status_code=200)


async def _link_offered(conn: asyncpg.Connection, actor: SlackActor,
                        settings: Settings) -> str:
    """A new one-time link, as the ephemeral message offering it says it."""
    code = await slack_service.new_link_code(
        conn, actor, ttl=timedelta(minutes=settings.slack_link_minutes))
    url = f"{settings.console_base}/slack/link/{code}"
    return (f"Open this link signed in to Waystation (the console, or with your token) to "
            f"link your Slack user; it works once, for {settings.slack_link_minutes:g} "
            f"minutes: {url}")


async def _link_by_email(request: Request, settings: Settings, api: SlackWebApi,
                         actor: SlackActor, channel: str | None) -> None:
    """After the answer to Slack (users.info may take a while): who the Slack user is linked
    to, or why not; with "both", a one-time link whenever the e-mail does not link them (and
    to a linked user, who may mean to link to someone else)."""
    emails = _directory(request, api)  # the refusal is followed by what else to do, if any
    async with pooled_connection(request, AUTHENTICATOR) as conn:
        linked = await slack_service.current_link(conn, actor)
        if linked is None:
            try:
                user = await slack_service.link_by_email(conn, actor, emails)
                text = (f"Your Slack user is linked to the Waystation user {user.name}, by "
                        f"the e-mail address Slack confirmed.")
            except ApiError as refused:
                text = _refusal(refused)
                if settings.slack_link_by == "both":
                    text = f"{text}\n{await _link_offered(conn, actor, settings)}"
        elif settings.slack_link_by == "both":
            text = await _link_offered(conn, actor, settings)
        else:
            text = f"Your Slack user is linked to the Waystation user {linked.name}."
    await _tell(api, channel, actor.slack_user, text)


@router.get("/link/{code}", response_model=SlackLinkView,
            responses={403: ERROR_RESPONSES[403]})
async def link_slack_user(code: Code, request: Request, user: CurrentUser,
                          conn: AuthenticatorConn) -> SlackLinkView:
    """Link the Slack user the code was made for to the caller (the code is spent)."""
    token = bearer_token(request.headers.get("authorization"))
    key = api_key_id(token) if token is not None and user.via == "api_key" else None
    await _count_write(request, user)  # a GET that writes: the middleware counts none
    return await slack_service.link(conn, user, code, api_key_id=key)


@router.post("/interactions", include_in_schema=False)
async def slack_interaction(request: Request, settings: SettingsDep, conn: AuthenticatorConn,
                            background: BackgroundTasks) -> Response:
    """A button clicked, or a modal submitted."""
    slack = await verified(request, conn, _secret(settings))
    if slack.repeated:
        return Response(status_code=200)
    try:
        payload = json.loads(parse_qs(slack.body.decode())["payload"][0])
        actor = SlackActor(team_id=payload["team"]["id"], slack_user=payload["user"]["id"])
    except (KeyError, IndexError, TypeError, ValueError, ValidationError) as error:
        raise ApiError(422, "invalid_request", "not a Slack interaction payload") from error
    api = _web_api(request, settings)
    emails = _emails(request, api, settings)
    if payload.get("type") == "block_actions":
        for action in payload.get("actions", []):
            if str(action.get("action_id", "")).startswith(DECIDE_ACTION):
                background.add_task(_clicked, request, api, emails, actor, action,
                                    payload.get("trigger_id"),
                                    (payload.get("channel") or {}).get("id"))
        return Response(status_code=200)
    view = payload.get("view") or {}
    if payload.get("type") == "view_submission" and view.get("callback_id") == CALLBACK_ID:
        return await _submitted(request, api, emails, actor, view, background)
    return Response(status_code=200)


async def _clicked(request: Request, api: SlackWebApi, emails: SlackEmails | None,
                   actor: SlackActor, action: dict[str, Any], trigger_id: str | None,
                   channel: str | None) -> None:
    """After the answer to Slack: decide the clicked option, or open its modal."""
    try:
        button = ButtonValue.model_validate_json(action.get("value") or "")
    except ValidationError:
        await _tell(api, channel, actor.slack_user, "Not done: that button is not Waystation's")
        return
    choice = SlackChoice(request_id=button.request_id, option=button.option,
                         digest=button.digest)
    try:
        async with pooled_connection(request, AUTHENTICATOR) as conn:
            user, gate, run = await slack_service.request_for(conn, actor, choice.request_id,
                                                              emails=emails)
            await _count_write(request, user)
            if needs_modal(gate, button.option):
                await api.call("views.open", trigger_id=trigger_id, view=decision_modal(
                    gate, button.option, ModalContext(button=button, channel=channel)))
                return
            await slack_service.vote(conn, await _temporal(request), user, gate, run, choice)
    except SlackError as error:
        log.warning("modal for %s not opened: %s", actor.slack_user, error)
        await _tell(api, channel, actor.slack_user,
                    "Not done: Slack did not open the form; click again")
    except Exception as error:  # noqa: BLE001 - a refusal, or a bug (_mapped raises it)
        await _tell(api, channel, actor.slack_user, _refusal(_mapped(error)))


async def _submitted(request: Request, api: SlackWebApi, emails: SlackEmails | None,
                     actor: SlackActor, view: dict[str, Any],
                     background: BackgroundTasks) -> Response:
    """A modal's submission: its errors shown in it, else the decision (waited for a
    moment, so the workflow's own refusals show in the modal too)."""
    try:
        context = ModalContext.model_validate_json(view.get("private_metadata") or "")
        values = view["state"]["values"]
    except (KeyError, TypeError, ValidationError) as error:
        raise ApiError(422, "invalid_request", "not a Waystation form") from error
    button = context.button
    try:
        async with pooled_connection(request, AUTHENTICATOR) as conn:
            user, gate, _ = await slack_service.request_for(conn, actor, button.request_id,
                                                            emails=emails)
        await _count_write(request, user)
    except ApiError as not_allowed:
        return _modal_errors({FEEDBACK_BLOCK: _refusal(not_allowed)})
    submission = read_submission(gate, button.option, values)
    if submission.errors:
        return _modal_errors(submission.errors)
    choice = SlackChoice(request_id=gate.id, option=button.option, digest=button.digest,
                         feedback=submission.feedback, answer=submission.answer)
    deciding = asyncio.ensure_future(_decide(request, actor, choice))
    try:
        await asyncio.wait_for(asyncio.shield(deciding), SUBMISSION_WAIT_SECONDS)
    except TimeoutError:
        background.add_task(_told_after, deciding, api, context.channel, actor.slack_user)
        return Response(status_code=200)
    except Exception as error:  # noqa: BLE001 - a refusal, or a bug (_mapped raises it)
        said = _mapped(error)
        block = _answer_block(values) if said.code == "invalid_answer" else FEEDBACK_BLOCK
        return _modal_errors({block: said.message})
    return Response(status_code=200)


def _answer_block(values: dict[str, Any]) -> str:
    return next((b for b in values if b != FEEDBACK_BLOCK), FEEDBACK_BLOCK)


async def _decide(request: Request, actor: SlackActor, choice: SlackChoice) -> None:
    async with pooled_connection(request, AUTHENTICATOR) as conn:
        await slack_service.decide_from_slack(conn, await _temporal(request), actor, choice)


async def _told_after(deciding: asyncio.Future[None], api: SlackWebApi, channel: str | None,
                      user: str) -> None:
    try:
        await deciding
    except Exception as error:  # noqa: BLE001 - a refusal, or a bug (_mapped raises it)
        await _tell(api, channel, user, _refusal(_mapped(error)))


def _mapped(error: Exception) -> ApiError:
    """What to tell the person: the service's refusal, or Temporal or the database being
    unreachable (503, "retry shortly"); anything else is a bug, raised (and logged)."""
    refused = as_api_error(error)
    if refused is None:
        raise error
    return refused


def _modal_errors(errors: dict[str, str]) -> JSONResponse:
    return JSONResponse({"response_action": "errors",
                         "errors": {k: v[:2000] for k, v in errors.items()}})


async def _count_write(request: Request, user: User) -> None:
    """A click, a submission or a link counts as one write of the linked user, as any write
    through another way in does (api/rate_limits.py): Slack's requests carry no credential
    of ours, so the middleware cannot count them. A 429 `ApiError` when over the limit."""
    limiter: Limiter = request.app.state.limiter
    await limiter.take_write(user.name)


async def _temporal(request: Request) -> Client:
    gateway: TemporalGateway = request.app.state.temporal
    return await gateway.client()

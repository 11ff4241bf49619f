"""Slack's word on who a Slack user is, for linking by e-mail (WAYSTATION_SLACK_LINK_BY=email
or both): the address in the user's profile (`users.info`, with the users:read.email scope),
believed only when Slack says it has confirmed it (`is_email_confirmed`). Every way this can
fail is a refusal to tell the person, before anything is written.

Asking costs a call of the app's Slack rate limit (users.info is Tier 4) for every click of an
unlinked user, so it is bounded: each ask counts as one write of the Slack user against the
write limit every way in shares, and Slack's answer about a Slack user is kept a few seconds
(`RecentAnswers`), so that a flood of clicks makes one call; a 429 from Slack is kept until
its Retry-After has passed, and told to the person as such."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

from waystation.activities.slack.web_api import SlackError, SlackRateLimited, SlackWebApi
from waystation.api.errors import ApiError, unavailable
from waystation.api.rate_limits import Limiter
from waystation.api.services.slack import SlackActor

# Slack's answers naming a user this app may not read.
UNKNOWN_USER_ERRORS = frozenset({"user_not_found", "user_not_visible"})
SCOPES_HINT = ("an admin of the Slack app adds the users:read and users:read.email scopes "
               "and reinstalls it")
# How long Slack's answer about a Slack user is kept: clicks within it ask Slack nothing.
ANSWER_SECONDS = 10.0


class RecentAnswers:
    """Slack's `users.info` answer (or refusal) about each Slack user, shared by this API
    process's requests for ANSWER_SECONDS after it came (a 429 until its Retry-After has
    passed): asks made while one is under way wait for its answer instead of making their own."""

    def __init__(self, seconds: float = ANSWER_SECONDS) -> None:
        self._seconds = seconds
        # Each Slack user's answer (or the ask under way) and until when it holds.
        self._answers: dict[tuple[str, str], tuple[asyncio.Future[dict[str, Any]], float]] = {}

    async def of(self, actor: SlackActor,
                 ask: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        now = time.monotonic()
        self._answers = {k: v for k, v in self._answers.items() if v[1] > now}
        key = (actor.team_id, actor.slack_user)
        if key not in self._answers:
            asking = asyncio.ensure_future(ask())
            self._answers[key] = (asking, math.inf)
            asking.add_done_callback(lambda done: self._answered(key, done))
        # Shielded: a request cancelled meanwhile does not cancel the others' answer.
        return await asyncio.shield(self._answers[key][0])

    def _answered(self, key: tuple[str, str], answer: asyncio.Future[dict[str, Any]]) -> None:
        error = None if answer.cancelled() else answer.exception()
        keep = max(self._seconds, error.retry_after) if isinstance(error, SlackRateLimited) \
            else self._seconds
        self._answers[key] = (answer, time.monotonic() + keep)


class SlackDirectory:
    """The confirmed e-mail address of a Slack user, asked of Slack's Web API (an address
    changed in Slack counts from the next link on), each ask counted against `limiter` as a
    write of the Slack user and answered from `answers` while that holds."""

    def __init__(self, api: SlackWebApi, answers: RecentAnswers, limiter: Limiter, *,
                 otherwise: str = "") -> None:
        self._api = api
        self._answers = answers
        self._limiter = limiter
        self.otherwise = otherwise

    async def confirmed_email(self, actor: SlackActor) -> str:
        # The Slack user is the caller: nobody here is known yet (429 when over the limit).
        await self._limiter.take_write(f"slack:{actor.team_id}:{actor.slack_user}")
        try:
            answer = await self._answers.of(
                actor, lambda: self._api.read("users.info", user=actor.slack_user))
        except SlackRateLimited as error:
            raise unavailable(f"Slack is answering too many requests; try again in "
                              f"{math.ceil(error.retry_after)} s") from error
        except SlackError as error:
            raise self._refusal_for(error) from error
        user: dict[str, Any] = answer.get("user") or {}
        if user.get("deleted") or user.get("is_bot"):
            raise self._refused("slack_email_unusable",
                                "a deactivated Slack user or a bot is linked to nobody")
        email = (user.get("profile") or {}).get("email")
        if not isinstance(email, str) or not email:
            # Slack leaves the address out, rather than refusing, without users:read.email.
            raise self._refused("slack_scope_missing", "Slack gave this app no e-mail address "
                                                       f"for you: {SCOPES_HINT}")
        if user.get("is_email_confirmed") is not True:
            raise self._refused("slack_email_unconfirmed",
                                "Slack has not confirmed your e-mail address: confirm it in "
                                "Slack, then try again")
        return email

    def _refusal_for(self, error: SlackError) -> ApiError:
        if error.code == "missing_scope":
            return self._refused("slack_scope_missing",
                                 f"this Slack app may not read who you are: {SCOPES_HINT}")
        if error.code in UNKNOWN_USER_ERRORS:
            return self._refused("slack_email_unusable",
                                 "Slack does not show your user to this app")
        # Slack unreachable, or refusing the app itself (a revoked token): not the person's.
        return unavailable(f"Slack did not say who you are ({error}); try again shortly")

    def _refused(self, code: str, message: str) -> ApiError:
        return ApiError(403, code, message + self.otherwise)

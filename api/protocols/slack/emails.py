"""Slack's word on who a Slack user is, for linking by e-mail (WAYSTATION_SLACK_LINK_BY=email
or both): the address in the user's profile (`users.info`, with the users:read.email scope),
believed only when Slack says it has confirmed it (`is_email_confirmed`). Every way this can
fail is a refusal to tell the person, before anything is written."""

from __future__ import annotations

from typing import Any

from waystation.activities.slack.web_api import SlackError, SlackRateLimited, SlackWebApi
from waystation.api.errors import ApiError, unavailable
from waystation.api.services.slack import SlackActor

# Slack's answers naming a user this app may not read.
UNKNOWN_USER_ERRORS = frozenset({"user_not_found", "user_not_visible"})
SCOPES_HINT = ("an admin of the Slack app adds the users:read and users:read.email scopes "
               "and reinstalls it")


class SlackDirectory:
    """The confirmed e-mail address of a Slack user, asked of Slack's Web API each time (an
    address changed in Slack counts from the next link on)."""

    def __init__(self, api: SlackWebApi, *, otherwise: str = "") -> None:
        self._api = api
        self.otherwise = otherwise

    async def confirmed_email(self, actor: SlackActor) -> str:
        try:
            answer = await self._api.read("users.info", user=actor.slack_user)
        except SlackRateLimited as error:
            raise unavailable(f"Slack is busy ({error}); try again shortly") from error
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

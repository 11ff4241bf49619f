"""Slack's Web API, as the worker and the API call it: slack-sdk's client, its answers sorted
into what a retry may mend and what it cannot.

The sdk's own retry handlers are left out on purpose: a send is retried by Temporal (the
notification's workflow, with backoff, across worker restarts), which honours a 429's
`Retry-After` as the delay before its next attempt (`SlackRateLimited`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

# Slack's answers no retry changes: the message is recorded as failed and left.
PERMANENT_ERRORS = frozenset({
    "channel_not_found", "is_archived", "not_in_channel", "invalid_blocks", "msg_too_long",
    "too_many_attachments", "message_not_found", "cant_update_message", "user_not_found",
    "invalid_arguments", "no_text", "cannot_dm_bot", "user_disabled", "invalid_metadata_format",
    "metadata_too_large"})
TIMEOUT_SECONDS = 10
SLACK_API_URL = "https://slack.com/api/"


class SlackError(Exception):
    """Slack did not do it; a later attempt may. `code` is Slack's `error`, when it said one."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class SlackRateLimited(SlackError):
    def __init__(self, method: str, retry_after: float) -> None:
        super().__init__(f"{method}: rate limited, retry after {retry_after:g} s")
        self.retry_after = retry_after


class SlackRefused(SlackError):
    """An answer that no retry changes (PERMANENT_ERRORS)."""


@dataclass(frozen=True)
class SlackConfig:
    """What the worker and the API need to reach Slack and to say where a gate goes."""

    bot_token: str
    api_url: str = SLACK_API_URL
    # Where gates go when nothing more specific is set; None: no channel message.
    channel: str | None = None
    # More specific channels: `project:<id>`, `group:<uuid>`, `kind:<name>` (first found wins,
    # in that order).
    channels: dict[str, str] = field(default_factory=dict)
    # Each linked decider also gets the gate in a DM.
    dm_deciders: bool = False
    # Links in the message.
    console_base: str = "http://127.0.0.1:8000"
    temporal_ui_base: str = "http://127.0.0.1:8233"
    temporal_namespace: str = "default"


class SlackWebApi:
    """The Web API methods Waystation calls, each one attempt."""

    def __init__(self, config: SlackConfig) -> None:
        base = config.api_url if config.api_url.endswith("/") else config.api_url + "/"
        # Thread-safe and reused: urllib under the hood, called from threads.
        self._client = WebClient(token=config.bot_token, base_url=base,
                                 timeout=TIMEOUT_SECONDS, retry_handlers=[])

    async def call(self, method: str, **body: Any) -> dict[str, Any]:
        """One call of `method` with a JSON body; its answer's fields when Slack said ok."""
        return await self._api_call(method, json=body)

    async def read(self, method: str, **params: Any) -> dict[str, Any]:
        """One call of a method that reads (`users.info`, `conversations.history`): a GET with
        its arguments in the query, as Slack documents them and slack-sdk sends them (they
        take no JSON body; booleans go as 1 and 0)."""
        return await self._api_call(method, http_verb="GET", params=params)

    async def _api_call(self, method: str, **request: Any) -> dict[str, Any]:
        try:
            response = await asyncio.to_thread(self._client.api_call, method, **request)
        except SlackApiError as error:
            status = error.response.status_code
            if status == 429:
                retry_after = float(error.response.headers.get("Retry-After", "1") or 1)
                raise SlackRateLimited(method, retry_after) from error
            code = (error.response.data or {}).get("error", f"HTTP {status}") \
                if isinstance(error.response.data, dict) else f"HTTP {status}"
            kind = SlackRefused if code in PERMANENT_ERRORS else SlackError
            raise kind(f"{method}: {code}", code) from error
        except (URLError, OSError, TimeoutError) as error:
            raise SlackError(f"{method}: {type(error).__name__}: {error}") from error
        return dict(response.data) if isinstance(response.data, dict) else {}

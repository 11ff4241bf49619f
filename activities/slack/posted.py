"""A post to Slack made once, though Slack's chat.postMessage takes no idempotency key.

A worker killed (or an attempt timed out) after Slack took a post but before its `ts` was
recorded would post it again on retry. So each post names what it is in its message metadata
(`PostKey`: the request, the audience, and which post: the gate's message, reminder n, the
escalation), and is preceded by a committed intent (slack_messages.post_started_at,
reply_started_at, migration 090). A retry that finds an intent without its outcome reads the
channel's history (or the thread's replies) since the intent, as Slack returns them with
`include_all_metadata`, and adopts the post it finds there instead of posting again.

The reading takes the app's `*:history` scopes and, in a channel, its membership (an app
posting by chat:write.public alone may not read): without them Slack says `missing_scope` or
`not_in_channel`, and the post is made again, logged (a gate shown twice rather than lost)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from waystation.activities.slack.web_api import SlackError, SlackWebApi

log = logging.getLogger(__name__)
EVENT_TYPE = "waystation_gate_message"
# Slack's clock (a message's ts) against the database's (the intent's time): a margin for the
# two disagreeing; it only widens what is read.
CLOCK_MARGIN = timedelta(minutes=1)
# Messages per page read (Slack suggests no more than 200).
PAGE = 200
# Slack's answers meaning this app may not read there: nothing can be found.
CANNOT_READ = frozenset({"missing_scope", "not_in_channel"})


class PostKey(BaseModel):
    """What a post is, as its metadata's payload names it (a key of what was found)."""

    model_config = ConfigDict(frozen=True)

    request_id: str
    audience: str
    what: Literal["gate", "reminder", "escalation"]
    number: int = 0  # a reminder's

    def metadata(self) -> dict[str, Any]:
        return {"event_type": EVENT_TYPE, "event_payload": self.model_dump()}


def key_of(message: dict[str, Any]) -> PostKey | None:
    """The key a message read from Slack carries, if it is one of Waystation's posts."""
    metadata = message.get("metadata")
    if not isinstance(metadata, dict) or metadata.get("event_type") != EVENT_TYPE:
        return None
    try:
        return PostKey.model_validate(metadata.get("event_payload"))
    except ValidationError:
        return None


async def posted_since(api: SlackWebApi, channel: str, since: datetime, *,
                       thread_ts: str | None = None,
                       page: int = PAGE) -> dict[PostKey, str] | None:
    """Waystation's posts in `channel` (in the thread of `thread_ts`, given it) since `since`:
    each one's ts by its key. None when this app may not read there (`CANNOT_READ`); another
    refusal, Slack down or a 429 raise (`SlackError`), for a retry to look again."""
    method, where = ("conversations.replies", {"ts": thread_ts}) if thread_ts is not None \
        else ("conversations.history", {})
    oldest = f"{(since - CLOCK_MARGIN).timestamp():.6f}"
    found: dict[PostKey, str] = {}
    cursor: str | None = None
    while True:
        try:
            answer = await api.read(method, channel=channel, oldest=oldest, limit=page,
                                    include_all_metadata=True, **where,
                                    **({"cursor": cursor} if cursor else {}))
        except SlackError as error:
            if error.code not in CANNOT_READ:
                raise
            log.warning("cannot read %s to find a post it may hold (%s): posting again",
                        channel, error.code)
            return None
        for message in answer.get("messages") or []:
            if (key := key_of(message)) is not None:
                found.setdefault(key, str(message["ts"]))
        cursor = (answer.get("response_metadata") or {}).get("next_cursor") or None
        if not answer.get("has_more") or cursor is None:
            return found

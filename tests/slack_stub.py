"""A local stand-in for Slack's Web API, speaking it as Slack does: JSON in, `{"ok": ...}` out
(HTTP 200 even for an error, which `error` names), bearer tokens, Block Kit limits, and rate
limits per method (HTTP 429 with Retry-After), and the app's scopes (`users.info` gives an
e-mail address only with users:read.email, as Slack does). Messages carry their metadata, and
`conversations.history` and `conversations.replies` read them back (newest first, and a thread
oldest first, its parent first) within `oldest`/`latest`, a page of `limit` at a time with
cursors, the metadata only with `include_all_metadata`, as Slack does. An outage can be ordered
(`outage`): every call answered 500 or 429 for a window. Tests also make trigger ids here, as
Slack puts one in each interaction for `views.open` (valid 3 s, used once), and may act at the
moment Slack has done a call but its caller has not heard (`after_taking`)."""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import yaml

from tests.local_server import LocalServer, QuietHandler

TOKEN = "xoxb-test-0123456789"
MAX_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
SECTION_TEXT_LIMIT = 3000
# Slack's limit on a message's metadata (its JSON).
METADATA_LIMIT = 8_000
# conversations.history's page, and conversations.replies': their default and most.
HISTORY_LIMIT = (100, 999)
REPLIES_LIMIT = (1000, 1000)
# Reading a conversation takes the scope of its kind (by its id's first letter).
HISTORY_SCOPES = {"C": "channels:history", "G": "groups:history", "D": "im:history"}
MESSAGE_TEXT_LIMIT = 40_000
TRIGGER_SECONDS = 3.0
TEAM = "T0WAYSTN"
# The bot's scopes: what the app's manifest asks for (a test takes some away).
MANIFEST = Path(__file__).resolve().parents[1] / "deploy" / "slack" / "manifest.yml"
SCOPES = frozenset(yaml.safe_load(MANIFEST.read_text())["oauth_config"]["scopes"]["bot"])


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None = None
    edits: int = 0
    metadata: dict[str, Any] | None = None
    # When it was posted (wall time): bench_human's "gate opened → Slack message posted".
    at: float = field(default_factory=time.time)


@dataclass
class SlackStub(LocalServer):
    # Calls allowed per method and second before a 429 (Slack's tiers, shortened), and a
    # method's own (its tier).
    per_second: float = 50.0
    method_limits: dict[str, float] = field(default_factory=dict)
    retry_after: int = 1
    messages: dict[tuple[str, str], Message] = field(default_factory=dict)
    ephemerals: list[dict[str, Any]] = field(default_factory=list)
    views: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[str, int]] = field(default_factory=list)  # (method, HTTP status)
    users: set[str] = field(default_factory=set)
    # A user's e-mail address and whether Slack has confirmed it (`is_email_confirmed`).
    emails: dict[str, tuple[str, bool]] = field(default_factory=dict)
    scopes: set[str] = field(default_factory=lambda: set(SCOPES))
    missing_channels: set[str] = field(default_factory=set)
    # Public channels the app posts to (chat:write.public) without being a member: it may not
    # read them (`not_in_channel`).
    outside_channels: set[str] = field(default_factory=set)
    # Called with a method and its body once the stand-in has done the call, before its answer
    # leaves: what a test does at that moment (a worker killed, its database connection cut).
    after_taking: Callable[[str, dict[str, Any]], None] | None = None
    url: str = ""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._ts = itertools.count(1)
        self._outage: tuple[float, int] | None = None
        self._recent: dict[str, list[float]] = {}
        self._triggers: dict[str, float] = {}

    # -- what tests order and read ---------------------------------------------------------
    def outage(self, seconds: float, status: int = 500) -> None:
        """Every call answered `status` (500, or 429 with Retry-After) for `seconds`."""
        self._outage = (time.monotonic() + seconds, status)

    def new_trigger(self) -> str:
        trigger = f"{next(self._ts)}.{int(time.time())}.trigger"
        self._triggers[trigger] = time.monotonic()
        return trigger

    def top_level(self) -> list[Message]:
        return [m for m in self.messages.values() if m.thread_ts is None]

    def replies(self, ts: str) -> list[Message]:
        return [m for m in self.messages.values() if m.thread_ts == ts]

    # -- the Web API -----------------------------------------------------------------------
    def _answer(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None:
            return {"ok": False, "error": "unknown_method"}
        return handler(body)

    def _new_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    def _message_error(self, body: dict[str, Any]) -> str | None:
        channel = body.get("channel")
        if not channel or channel in self.missing_channels:
            return "channel_not_found"
        blocks = body.get("blocks")
        if blocks is None and not body.get("text"):
            return "no_text"
        if len(body.get("text") or "") > MESSAGE_TEXT_LIMIT:
            return "msg_too_long"
        if blocks is not None and not _valid_blocks(blocks, MAX_BLOCKS):
            return "invalid_blocks"
        return None

    def _chat_postMessage(self, body: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        if (error := self._message_error(body)) is not None:
            return {"ok": False, "error": error}
        if (error := _metadata_error(body.get("metadata"))) is not None:
            return {"ok": False, "error": error}
        thread = body.get("thread_ts")
        if thread is not None and (body["channel"], thread) not in self.messages:
            return {"ok": False, "error": "thread_not_found"}
        message = Message(channel=body["channel"], ts=self._new_ts(), text=body.get("text", ""),
                          blocks=body.get("blocks") or [], thread_ts=thread,
                          metadata=body.get("metadata"))
        self.messages[(message.channel, message.ts)] = message
        return {"ok": True, "channel": message.channel, "ts": message.ts,
                "message": {"text": message.text, "blocks": message.blocks}}

    def _chat_update(self, body: dict[str, Any]) -> dict[str, Any]:
        if (error := self._message_error(body)) is not None:
            return {"ok": False, "error": error}
        message = self.messages.get((body["channel"], body.get("ts", "")))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        message.text, message.edits = body.get("text", message.text), message.edits + 1
        if body.get("blocks") is not None:
            message.blocks = body["blocks"]
        return {"ok": True, "channel": message.channel, "ts": message.ts, "text": message.text}

    def _chat_postEphemeral(self, body: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        if (error := self._message_error(body)) is not None:
            return {"ok": False, "error": error}
        if not body.get("user"):
            return {"ok": False, "error": "user_not_found"}
        self.ephemerals.append(body)
        return {"ok": True, "message_ts": self._new_ts()}

    def _conversations_open(self, body: dict[str, Any]) -> dict[str, Any]:
        user = body.get("users", "")
        if user not in self.users:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "channel": {"id": f"D{user}"}}

    def _conversations_history(self, body: dict[str, Any]) -> dict[str, Any]:
        """A conversation's messages (not its threads' replies), newest first."""
        if (error := self._read_error(body)) is not None:
            return error
        found = sorted((m for m in self.messages.values()
                        if m.channel == body["channel"] and m.thread_ts is None),
                       key=lambda m: float(m.ts), reverse=True)
        return self._page(found, body, HISTORY_LIMIT, newest_first=True)

    def _conversations_replies(self, body: dict[str, Any]) -> dict[str, Any]:
        """A thread: its parent first, then its replies, oldest first."""
        if (error := self._read_error(body)) is not None:
            return error
        parent = self.messages.get((body["channel"], str(body.get("ts", ""))))
        if parent is None or parent.thread_ts is not None:
            return {"ok": False, "error": "thread_not_found"}
        replies = sorted(self.replies(parent.ts), key=lambda m: float(m.ts))
        answer = self._page(replies, body, REPLIES_LIMIT, newest_first=False)
        if answer["ok"] and not body.get("cursor"):
            answer["messages"].insert(0, _read(parent, _flag(body, "include_all_metadata")))
        return answer

    def _read_error(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """Slack's refusals of a reading: no such channel, a scope the app lacks, a channel
        it is not in, bounds that are not timestamps."""
        channel = str(body.get("channel") or "")
        if not channel or channel in self.missing_channels:
            return {"ok": False, "error": "channel_not_found"}
        needed = HISTORY_SCOPES.get(channel[0], "channels:history")
        if needed not in self.scopes:
            return {"ok": False, "error": "missing_scope", "needed": needed,
                    "provided": ",".join(sorted(self.scopes))}
        if channel in self.outside_channels:
            return {"ok": False, "error": "not_in_channel"}
        for bound in ("oldest", "latest"):
            try:
                float(body.get(bound) or 0)
            except (TypeError, ValueError):
                return {"ok": False, "error": f"invalid_ts_{bound}"}
        return None

    def _page(self, messages: list[Message], body: dict[str, Any], limits: tuple[int, int], *,
              newest_first: bool) -> dict[str, Any]:
        """One page of `messages` (in reading order) within `oldest` and `latest`, from the
        cursor on: `has_more` and the next cursor say whether another follows."""
        inclusive = _flag(body, "inclusive")
        oldest, latest = float(body.get("oldest") or 0), body.get("latest")
        newest = float(latest) if latest else float("inf")
        within = [m for m in messages
                  if (oldest <= float(m.ts) if inclusive else oldest < float(m.ts))
                  and (float(m.ts) <= newest if inclusive else float(m.ts) < newest)]
        try:
            limit = min(int(body.get("limit") or limits[0]), limits[1])
        except (TypeError, ValueError):
            return {"ok": False, "error": "invalid_arguments"}
        if cursor := body.get("cursor"):
            try:
                after = base64.b64decode(str(cursor), validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                return {"ok": False, "error": "invalid_cursor"}
            if not after.startswith("next_ts:"):
                return {"ok": False, "error": "invalid_cursor"}
            mark = after.removeprefix("next_ts:")
            within = [m for m in within if (float(m.ts) < float(mark) if newest_first
                                            else float(m.ts) > float(mark))]
        page, more = within[:limit], len(within) > limit
        answer: dict[str, Any] = {
            "ok": True, "has_more": more,
            "messages": [_read(m, _flag(body, "include_all_metadata")) for m in page]}
        if more:
            answer["response_metadata"] = {
                "next_cursor": base64.b64encode(f"next_ts:{page[-1].ts}".encode()).decode()}
        return answer

    def _users_info(self, body: dict[str, Any]) -> dict[str, Any]:
        if "users:read" not in self.scopes:
            return {"ok": False, "error": "missing_scope", "needed": "users:read",
                    "provided": ",".join(sorted(self.scopes))}
        user = body.get("user", "")
        if user not in self.users:
            return {"ok": False, "error": "user_not_found"}
        profile: dict[str, Any] = {"real_name": user, "display_name": user.lower()}
        email, confirmed = self.emails.get(user, (None, False))
        # Without users:read.email the field is left out, not refused (Slack's users.info).
        if email is not None and "users:read.email" in self.scopes:
            profile["email"] = email
        return {"ok": True, "user": {"id": user, "team_id": TEAM, "name": user.lower(),
                                     "deleted": False, "is_bot": False, "profile": profile,
                                     "is_email_confirmed": confirmed}}

    def _views_open(self, body: dict[str, Any]) -> dict[str, Any]:
        made = self._triggers.pop(body.get("trigger_id", ""), None)
        if made is None:
            return {"ok": False, "error": "invalid_trigger_id"}
        if time.monotonic() - made > TRIGGER_SECONDS:
            return {"ok": False, "error": "expired_trigger_id"}
        view = body.get("view") or {}
        if view.get("type") != "modal" or not _valid_blocks(view.get("blocks") or [],
                                                             MAX_VIEW_BLOCKS):
            return {"ok": False, "error": "invalid_arguments"}
        self.views.append(view)
        return {"ok": True, "view": {"id": f"V{len(self.views)}", **view}}

    def _status(self, method: str) -> int:
        """200, or the status an outage or the rate limit answers with."""
        now = time.monotonic()
        if self._outage is not None and now < self._outage[0]:
            return self._outage[1]
        recent = [t for t in self._recent.get(method, []) if now - t < 1.0]
        if len(recent) >= self.method_limits.get(method, self.per_second):
            self._recent[method] = recent
            return 429
        self._recent[method] = [*recent, now]
        return 200

    # -- the server ------------------------------------------------------------------------
    path = "/api/"

    def handler(self) -> type[QuietHandler]:
        stub = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                self._serve(self.path, lambda: _body(self.headers, raw))

            def do_GET(self) -> None:  # noqa: N802 - reading methods take a query
                path, _, query = self.path.partition("?")
                self._serve(path, lambda: dict(parse_qsl(query)))

            def _serve(self, path: str, body: Callable[[], dict[str, Any]]) -> None:
                method = path.rstrip("/").rsplit("/", 1)[-1]
                with stub._lock:
                    status = stub._status(method)
                    if status != 200:
                        answer: dict[str, Any] = {"ok": False, "error": "ratelimited"} \
                            if status == 429 else {}
                    elif self.headers.get("authorization") != f"Bearer {TOKEN}":
                        answer = {"ok": False, "error": "invalid_auth"}
                    else:
                        answer = stub._answer(method, body())
                    stub.calls.append((method, status))
                if status == 200 and answer.get("ok") and stub.after_taking is not None:
                    stub.after_taking(method, body())
                payload = json.dumps(answer).encode() if status != 500 else b"upstream error"
                headers = {"content-type": "application/json; charset=utf-8"
                           if status != 500 else "text/plain"}
                if status == 429:
                    headers["retry-after"] = str(stub.retry_after)
                self.answer(status, payload, headers)

        return Handler


def _body(headers: Any, raw: bytes) -> dict[str, Any]:
    """A JSON body, or a form one (`blocks` then a JSON string), as Slack takes either."""
    if headers.get("content-type", "").startswith("application/json"):
        return json.loads(raw or b"{}")
    body: dict[str, Any] = dict(parse_qsl(raw.decode()))
    for key in ("blocks", "view", "metadata"):
        if isinstance(body.get(key), str):
            body[key] = json.loads(body[key])
    return body


def _flag(body: dict[str, Any], name: str) -> bool:
    """A boolean argument: JSON's, or a query's (`1`, `true`; slack-sdk sends 1 and 0)."""
    value = body.get(name)
    return value is True or str(value).lower() in {"1", "true"}


def _read(message: Message, with_metadata: bool) -> dict[str, Any]:
    """A message as the reading methods return it (its metadata only when asked for)."""
    read: dict[str, Any] = {"type": "message", "bot_id": "BWAYSTN", "text": message.text,
                            "ts": message.ts, "blocks": message.blocks}
    if message.thread_ts is not None:
        read["thread_ts"] = message.thread_ts
    if with_metadata and message.metadata is not None:
        read["metadata"] = message.metadata
    return read


def _metadata_error(metadata: Any) -> str | None:
    """Slack's refusals of a message's metadata: not an event type and a payload object, or
    too large."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict) or not isinstance(metadata.get("event_type"), str) \
            or not metadata["event_type"] or not isinstance(metadata.get("event_payload"), dict):
        return "invalid_metadata_format"
    if len(json.dumps(metadata)) > METADATA_LIMIT:
        return "metadata_too_large"
    return None


def _valid_blocks(blocks: Any, limit: int) -> bool:
    """Slack's limits on blocks: how many, and 3,000 characters of a section's text."""
    if not isinstance(blocks, list) or len(blocks) > limit:
        return False
    for block in blocks:
        if not isinstance(block, dict) or "type" not in block:
            return False
        text = block.get("text")
        if isinstance(text, dict) and len(text.get("text", "")) > SECTION_TEXT_LIMIT:
            return False
    return True

"""What Slack sends Waystation, as Slack sends it: form-encoded, signed with the app's signing
secret over `v0:<timestamp>:<body>` (slack-sdk's SignatureVerifier makes the signature), an
interaction's JSON in its `payload` field."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
from slack_sdk.signature import SignatureVerifier

from tests.slack_stub import TEAM, Message, SlackStub
from waystation.testing import eventually

SIGNING_SECRET = "slack-signing-secret-0123456789abcdef"
LINK = re.compile(r"(http://\S+/slack/link/(\S+))")


def signed(body: str, *, secret: str = SIGNING_SECRET,
           timestamp: int | None = None) -> dict[str, str]:
    stamp = str(timestamp if timestamp is not None else int(time.time()))
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    return {"content-type": "application/x-www-form-urlencoded",
            "x-slack-request-timestamp": stamp, "x-slack-signature": signature or ""}


@dataclass
class SlackPerson:
    """A Slack user clicking in the workspace the stand-in plays."""

    http: httpx.AsyncClient
    stub: SlackStub
    slack_id: str

    async def command(self, text: str, channel: str = "CGATES") -> httpx.Response:
        body = urlencode({"token": "unused", "team_id": TEAM, "user_id": self.slack_id,
                          "command": "/waystation", "text": text, "channel_id": channel,
                          "trigger_id": self.stub.new_trigger(),
                          "response_url": "http://127.0.0.1:9/unused"})
        return await self.http.post("/slack/commands", content=body, headers=signed(body))

    async def link_to(self, bearer: dict[str, str]) -> httpx.Response:
        """`/waystation link`, then the link opened with the Waystation user's credential."""
        before = len(self.stub.ephemerals)
        assert (await self.command("link")).status_code == 200
        told = await eventually(lambda: _after(self.stub.ephemerals, before))
        assert told["user"] == self.slack_id
        url = LINK.search(told["text"])
        assert url, told
        return await self.http.get(f"/slack/link/{url.group(2)}", headers=bearer)

    def interaction(self, payload: dict[str, Any]) -> str:
        return urlencode({"payload": json.dumps(payload)})

    async def post(self, body: str) -> httpx.Response:
        return await self.http.post("/slack/interactions", content=body, headers=signed(body))

    def click_body(self, message: Message, option: str) -> str:
        button = button_of(message, option)
        return self.interaction({
            "type": "block_actions", "team": {"id": TEAM},
            "user": {"id": self.slack_id, "team_id": TEAM},
            "api_app_id": "A0WAYSTN", "trigger_id": self.stub.new_trigger(),
            "channel": {"id": message.channel},
            "container": {"type": "message", "message_ts": message.ts,
                          "channel_id": message.channel},
            "message": {"ts": message.ts, "text": message.text, "blocks": message.blocks},
            "actions": [{"type": "button", "action_id": button["action_id"],
                         "block_id": "options-0", "value": button["value"],
                         "action_ts": f"{time.time():.6f}"}]})

    async def click(self, message: Message, option: str) -> httpx.Response:
        return await self.post(self.click_body(message, option))

    async def submit(self, view: dict[str, Any], values: dict[str, Any]) -> httpx.Response:
        """A modal submitted with `values` typed in: {block_id: text, or ("select", value)}."""
        state: dict[str, Any] = {}
        for block_id, value in values.items():
            if isinstance(value, tuple):
                state[block_id] = {"value": {"type": "static_select", "selected_option": {
                    "value": json.dumps(value[1])}}}
            else:
                state[block_id] = {"value": {"type": "plain_text_input", "value": value}}
        return await self.post(self.interaction({
            "type": "view_submission", "team": {"id": TEAM},
            "user": {"id": self.slack_id, "team_id": TEAM},
            "view": {"id": "V1", "type": "modal", "callback_id": view["callback_id"],
                     "private_metadata": view["private_metadata"],
                     "state": {"values": state}}}))


async def _after(items: list[Any], count: int) -> Any:
    return items[count] if len(items) > count else None


def button_of(message: Message, option: str) -> dict[str, Any]:
    for block in message.blocks:
        for element in block.get("elements", []):
            if element.get("type") == "button" and json.loads(element["value"])[
                    "option"] == option:
                return element
    raise AssertionError(f"no {option!r} button in {message.blocks}")


def buttons(message: Message) -> list[dict[str, Any]]:
    return [json.loads(e["value"]) for b in message.blocks for e in b.get("elements", [])
            if e.get("type") == "button"]


def text_of(message: Message) -> str:
    """Everything the message says, as one string."""
    return json.dumps(message.blocks, ensure_ascii=False)

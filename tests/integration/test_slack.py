"""Gates in Slack on the real stack: the dev server, PostgreSQL, the API under uvicorn, a
worker, and a local stand-in for Slack's Web API (tests/slack_stub.py); Slack's requests are
signed as Slack signs them (tests/slack_client.py)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import httpx
import pytest_asyncio

from activities.agents import backend_named
from api.auth import issue_token
from tests.agent_helpers import BOOK
from tests.helpers import IDEA
from tests.slack_client import SlackPerson, buttons, signed, text_of
from tests.slack_stub import TOKEN, Message, SlackStub
from waystation.settings import Settings
from waystation.testing import InProcessApi, eventually
from waystation.worker import build_worker

SECRET = "slack-api-secret-0123456789-0123456789-ab"
GATE = "approve_founders_brief"
CHANNEL = "CGATES"


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(SECRET, user)}"}


@dataclass
class Stack:
    http: httpx.AsyncClient
    stub: SlackStub
    pool: asyncpg.Pool

    def person(self, slack_id: str) -> SlackPerson:
        self.stub.users.add(slack_id)
        return SlackPerson(self.http, self.stub, slack_id)

    async def message_for(self, request_id: str) -> Message:
        """The message showing the request (its buttons name it)."""
        async def found() -> Message | None:
            return next((m for m in self.stub.top_level()
                         if request_id in json.dumps(m.blocks)), None)
        return await eventually(found, timeout=30)

    async def updated(self, message: Message, saying: str) -> Message:
        """The message once an update made it say `saying`."""
        async def says() -> Message | None:
            now = self.stub.messages[(message.channel, message.ts)]
            return now if saying in text_of(now) else None
        return await eventually(says, timeout=30)

    async def written(self, request_id: str) -> tuple[str, int]:
        """The request's status and how many votes it has: what a refusal must leave."""
        async with self.pool.acquire() as conn:
            status = await conn.fetchval("SELECT status FROM hitl_requests WHERE id = $1",
                                         uuid.UUID(request_id))
            votes = await conn.fetchval("SELECT count(*) FROM gate_votes WHERE request_id = $1",
                                        uuid.UUID(request_id))
        return status, votes


@pytest_asyncio.fixture
async def slack(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[Stack]:
    with SlackStub() as stub:
        config = Settings(database_url=migrated_url, jwt_secret=SECRET,
                          temporal_task_queue=task_queue,
                          temporal_address=dev_env.client.service_client.config.target_host,
                          slack_bot_token=TOKEN, slack_signing_secret=SIGNING_SECRET,
                          slack_channel=CHANNEL, slack_api_url=stub.url)
        api = InProcessApi(config)
        await api.start()
        try:
            async with build_worker(dev_env.client, pool, task_queue=task_queue,
                                    backend=backend_named("offline"), settings=config), \
                    httpx.AsyncClient(base_url=api.url, timeout=30) as http:
                yield Stack(http, stub, pool)
        finally:
            await api.stop()


from tests.slack_client import SIGNING_SECRET  # noqa: E402


async def pending(http: httpx.AsyncClient, run_id: str, user: str) -> dict:
    async def check() -> dict | None:
        run = (await http.get(f"/runs/{run_id}", headers=auth(user))).json()
        return run["pending_decision"] if run.get("pending_checkpoint") else None
    return await eventually(check, timeout=60)


async def start_validation(http: httpx.AsyncClient, owner: str, **fields) -> str:
    started = await http.post("/runs", headers=auth(owner), json={
        "kind": "validation", **fields, "input": {"entrepreneur_input": IDEA, "gates": [GATE]}})
    assert started.status_code == 201, started.text
    return started.json()["run_id"]


async def test_a_validation_gate_is_decided_from_slack(slack: Stack):
    http, stub = slack.http, slack.stub
    alice = f"alice-{uuid.uuid4().hex[:6]}"
    run_id = await start_validation(http, alice)
    gate = await pending(http, run_id, alice)
    request_id = gate["request_id"]

    message = await slack.message_for(request_id)
    assert message.channel == CHANNEL
    shown = text_of(message)
    assert gate["title"] in shown and run_id in shown and "phase" in shown
    assert "Recommended" in shown and "Expires" in shown
    assert f"/console/#/runs/{run_id}" in shown and f"/workflows/validation-{run_id}" in shown
    # One button per option, each naming the request it decides and what it showed.
    assert [(b["option"], b["request_id"], b["digest"]) for b in buttons(message)] == [
        (o["value"], request_id, gate["digest"]) for o in gate["options"]]

    # Not linked yet: an ephemeral refusal, nothing written.
    me = slack.person("UALICE")
    refused_before = len(stub.ephemerals)
    assert (await me.click(message, "approve")).status_code == 200
    told = await eventually(lambda: _nth(stub.ephemerals, refused_before))
    assert told["user"] == "UALICE" and "not linked" in told["text"]
    assert await slack.written(request_id) == ("pending", 0)

    linked = await me.link_to(auth(alice))
    assert linked.status_code == 200, linked.text
    assert linked.json()["user"] == alice and linked.json()["slack_user"] == "UALICE"
    assert (await me.click(message, "approve")).status_code == 200
    decided = await slack.updated(message, "approved")
    assert await slack.written(request_id) == ("approved", 1)
    run = (await http.get(f"/runs/{run_id}/decisions", headers=auth(alice))).json()
    assert run["decisions"][0]["decided_by"] == alice
    # The message now says who decided what, and offers no button.
    assert f"approved by {alice}" in text_of(decided) and buttons(decided) == []


async def _nth(items: list, n: int):
    return items[n] if len(items) > n else None

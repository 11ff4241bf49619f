"""Gates in Slack on the real stack: the dev server, PostgreSQL, the API under uvicorn, a
worker, and a local stand-in for Slack's Web API (tests/slack_stub.py); Slack's requests are
signed as Slack signs them (tests/slack_client.py)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from tests.agent_helpers import BOOK
from tests.helpers import IDEA
from tests.slack_client import SIGNING_SECRET, SlackPerson, buttons, signed, text_of
from tests.slack_stub import TOKEN, Message, SlackStub
from waystation.activities.agents import backend_named
from waystation.activities.slack.channel import SlackActivities, SlackSyncInput
from waystation.activities.slack.web_api import SlackConfig
from waystation.api.auth import issue_token
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


@asynccontextmanager
async def slack_stack(migrated_url: str, dev_env: WorkflowEnvironment, pool: asyncpg.Pool,
                      task_queue: str, **settings: Any) -> AsyncIterator[Stack]:
    """The API and a worker configured for Slack, its Web API the stand-in's."""
    with SlackStub() as stub:
        config = Settings(database_url=migrated_url, jwt_secret=SECRET,
                          temporal_task_queue=task_queue,
                          temporal_address=dev_env.client.service_client.config.target_host,
                          slack_bot_token=TOKEN, slack_signing_secret=SIGNING_SECRET,
                          slack_channel=CHANNEL, slack_api_url=stub.url, **settings)
        api = InProcessApi(config)
        await api.start()
        try:
            async with build_worker(dev_env.client, pool, task_queue=task_queue,
                                    backend=backend_named("offline"), settings=config), \
                    httpx.AsyncClient(base_url=api.url, timeout=30) as http:
                yield Stack(http, stub, pool)
        finally:
            await api.stop()


@pytest_asyncio.fixture
async def slack(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[Stack]:
    async with slack_stack(migrated_url, dev_env, pool, task_queue) as stack:
        yield stack


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


async def test_a_tool_call_is_approved_from_slack_with_an_edited_argument(slack: Stack):
    http, stub = slack.http, slack.stub
    priya = f"priya-{uuid.uuid4().hex[:6]}"
    me = slack.person("UPRIYA")
    assert (await me.link_to(auth(priya))).status_code == 200
    started = await http.post("/runs", headers=auth(priya),
                              json={"kind": "agent", "input": {"message": BOOK}})
    run_id = started.json()["run_id"]
    gate = await pending(http, run_id, priya)
    message = await slack.message_for(gate["request_id"])
    # The tool and its arguments are shown.
    assert "book_vendor" in text_of(message) and "v-venue-03" in text_of(message)

    assert (await me.click(message, "edit")).status_code == 200
    modal = await eventually(lambda: _nth(stub.views, 0))
    inputs = {b["block_id"]: b for b in modal["blocks"] if b["type"] == "input"}
    assert {"answer.vendor_id", "answer.date", "answer.guests", "feedback"} <= set(inputs)
    assert inputs["answer.guests"]["element"]["initial_value"] == "200"
    typed = {"answer.vendor_id": "v-venue-03", "answer.date": "2027-02-14"}

    # A wrong type is shown in the modal, on its input; nothing is written.
    wrong = await me.submit(modal, typed | {"answer.guests": "many"})
    assert wrong.status_code == 200 and wrong.json()["response_action"] == "errors"
    assert set(wrong.json()["errors"]) == {"answer.guests"}
    missing = await me.submit(modal, {"answer.vendor_id": "v-venue-03"})
    assert set(missing.json()["errors"]) == {"answer.date", "answer.guests"}, missing.text
    assert await slack.written(gate["request_id"]) == ("pending", 0)

    done = await me.submit(modal, typed | {"answer.guests": "150", "feedback": "fewer"})
    assert done.status_code == 200 and not done.content, done.text
    decided = await slack.updated(message, "approved")
    assert buttons(decided) == []
    audit = (await http.get(f"/runs/{run_id}/decisions", headers=auth(priya))).json()
    assert audit["decisions"][0]["answer"]["guests"] == 150
    assert audit["decisions"][0]["decided_by"] == priya
    await http.post(f"/runs/{run_id}/cancel", headers=auth(priya))


async def test_a_typed_answer_through_the_modal_and_a_two_vote_quorum(slack: Stack):
    http, stub = slack.http, slack.stub
    p = {n: f"{n}-{uuid.uuid4().hex[:6]}" for n in ("alice", "bob", "dave")}
    group = (await http.post("/groups", json={"name": "Board"},
                             headers=auth(p["alice"]))).json()["group_id"]
    for who in ("bob", "dave"):
        await http.post(f"/groups/{group}/members", headers=auth(p["alice"]),
                        json={"user": p[who], "role": "approver"})
    schema = {"type": "object", "properties": {"budget": {"type": "number", "minimum": 1}},
              "required": ["budget"]}
    run_id = await start_validation(http, p["alice"], group_id=group, gates={
        "*": {"quorum": 2, "answer_schema": schema}})
    gate = await pending(http, run_id, p["alice"])
    message = await slack.message_for(gate["request_id"])
    assert "Votes 0 of 2" in text_of(message)
    bob, dave = slack.person("UBOB"), slack.person("UDAVE")
    for person, user in ((bob, p["bob"]), (dave, p["dave"])):
        assert (await person.link_to(auth(user))).status_code == 200

    # Approving takes the typed answer: a modal built from the schema.
    assert (await bob.click(message, "approve")).status_code == 200
    modal = await eventually(lambda: _nth(stub.views, 0))
    assert [b["block_id"] for b in modal["blocks"] if b["type"] == "input"] == [
        "answer.budget", "feedback"]
    low = await bob.submit(modal, {"answer.budget": "0"})
    assert "minimum" in low.json()["errors"]["answer.budget"], low.text
    assert await slack.written(gate["request_id"]) == ("pending", 0)
    assert (await bob.submit(modal, {"answer.budget": "2.5"})).status_code == 200
    voted = await slack.updated(message, "Votes 1 of 2")
    assert p["bob"] in text_of(voted) and buttons(voted)  # still open: one more vote needed

    assert (await dave.click(voted, "approve")).status_code == 200
    second = await eventually(lambda: _nth(stub.views, 1))
    assert (await dave.submit(second, {"answer.budget": "3"})).status_code == 200
    decided = await slack.updated(message, "approved by")
    assert buttons(decided) == []
    assert await slack.written(gate["request_id"]) == ("approved", 2)


async def test_a_decision_in_the_console_updates_the_message(slack: Stack):
    http = slack.http
    alice = f"alice-{uuid.uuid4().hex[:6]}"
    run_id = await start_validation(http, alice)
    gate = await pending(http, run_id, alice)
    message = await slack.message_for(gate["request_id"])
    decided = await http.post(f"/runs/{run_id}/decisions/{GATE}", headers=auth(alice),
                              json={"decision": "reject", "feedback": "not now",
                                    "digest": gate["digest"]})
    assert decided.status_code == 200, decided.text
    shown = await slack.updated(message, f"rejected by {alice}")
    assert "not now" in text_of(shown) and buttons(shown) == []


async def test_who_may_not_decide_is_refused_in_slack_and_nothing_is_written(slack: Stack):
    http, stub = slack.http, slack.stub
    p = {n: f"{n}-{uuid.uuid4().hex[:6]}" for n in ("alice", "bob", "carol")}
    group = (await http.post("/groups", json={"name": "Board"},
                             headers=auth(p["alice"]))).json()["group_id"]
    for who, role in (("bob", "approver"), ("carol", "viewer")):
        await http.post(f"/groups/{group}/members", headers=auth(p["alice"]),
                        json={"user": p[who], "role": role})
    bob, carol, stranger = slack.person("UBOB"), slack.person("UCAROL"), slack.person("UNONE")
    assert (await bob.link_to(auth(p["bob"]))).status_code == 200
    assert (await carol.link_to(auth(p["carol"]))).status_code == 200
    run_id = await start_validation(http, p["alice"], group_id=group)
    gate = await pending(http, run_id, p["alice"])
    request_id = gate["request_id"]
    message = await slack.message_for(request_id)
    removed = await http.delete(f"/groups/{group}/members/{p['bob']}", headers=auth(p["alice"]))
    assert removed.status_code in (200, 204), removed.text

    # Not linked; a viewer; a member removed since the message was sent.
    for person, why in ((stranger, "not linked"), (carol, "role 'viewer' may not decide"),
                        (bob, "not one you can see")):
        before = len(stub.ephemerals)
        assert (await person.click(message, "approve")).status_code == 200
        told = await eventually(lambda before=before: _nth(stub.ephemerals, before))
        assert told["user"] == person.slack_id and why in told["text"], told
    assert await slack.written(request_id) == ("pending", 0)

    # Unsigned, wrongly signed, stale and replayed requests: 401, nothing done.
    click = carol.click_body(message, "approve")
    unsigned = await http.post("/slack/interactions", content=click,
                               headers={"content-type": "application/x-www-form-urlencoded"})
    assert unsigned.status_code == 401
    forged = await http.post("/slack/interactions", content=click,
                             headers=signed(click, secret="not-the-signing-secret"))
    assert forged.status_code == 401
    stale = await http.post("/slack/interactions", content=click,
                            headers=signed(click, timestamp=int(time.time()) - 600))
    assert stale.status_code == 401
    owner = slack.person("UALICE")
    assert (await owner.link_to(auth(p["alice"]))).status_code == 200
    approve = owner.click_body(message, "approve")
    headers = signed(approve)
    first = await http.post("/slack/interactions", content=approve, headers=headers)
    replayed = await http.post("/slack/interactions", content=approve, headers=headers)
    assert first.status_code == 200 and replayed.status_code == 401
    assert replayed.json()["error"]["code"] == "replayed_request"
    # Slack's own retry of it (marked so) is acknowledged, and not acted on again.
    retried = await http.post("/slack/interactions", content=approve,
                              headers=headers | {"x-slack-retry-num": "1"})
    assert retried.status_code == 200
    await slack.updated(message, f"approved by {p['alice']}")
    assert await slack.written(request_id) == ("approved", 1)


# An outage of Slack waited out (7 s): the slow tier.
@pytest.mark.slow
async def test_a_slack_outage_loses_no_message(slack: Stack):
    """Slack answering 500, then 429 with Retry-After, for a window (the stand-in's setting;
    a few seconds here for a minute's outage): the messages arrive once it is over, once."""
    http, stub = slack.http, slack.stub
    alice = f"alice-{uuid.uuid4().hex[:6]}"
    stub.outage(4, status=500)
    run_id = await start_validation(http, alice)
    gate = await pending(http, run_id, alice)
    message = await eventually(lambda: _posted(slack, gate["request_id"]), timeout=60)
    assert ("chat.postMessage", 500) in stub.calls

    stub.retry_after = 2
    stub.outage(3, status=429)
    refused_at = len(stub.calls)
    decided = await http.post(f"/runs/{run_id}/decisions/{GATE}", headers=auth(alice),
                              json={"decision": "approve", "digest": gate["digest"]})
    assert decided.status_code == 200, decided.text
    await eventually(lambda: slack.updated(message, f"approved by {alice}"), timeout=60)
    limited = [s for _, s in stub.calls[refused_at:]]
    assert 429 in limited and limited[-1] == 200
    # One message for the request however many attempts it took; its log says they were made.
    assert len([m for m in stub.top_level() if m.ts == message.ts]) == 1
    assert len(stub.top_level()) == 1
    async with slack.pool.acquire() as conn:
        log = await conn.fetchrow("SELECT attempts, last_error FROM slack_messages "
                                  "WHERE request_id = $1", uuid.UUID(gate["request_id"]))
    assert log["attempts"] >= 2 and log["last_error"] is None


async def _posted(slack: Stack, request_id: str) -> Message | None:
    return next((m for m in slack.stub.top_level() if request_id in json.dumps(m.blocks)), None)


async def test_a_link_ends_with_key_revocation_and_erasure(slack: Stack):
    http, stub = slack.http, slack.stub
    alice = f"alice-{uuid.uuid4().hex[:6]}"
    key = (await http.post("/api-keys", headers=auth(alice), json={"name": "slack"})).json()
    me = slack.person("UALICE")
    linked = await me.link_to({"Authorization": f"Bearer {key['key']}"})
    assert linked.status_code == 200 and linked.json()["user"] == alice, linked.text
    # A code works once.
    code_used = await me.link_to(auth(alice))
    assert code_used.status_code == 200
    again = await http.get(f"/slack/link/{code_used.url.path.rsplit('/', 1)[-1]}",
                           headers=auth(alice))
    assert again.status_code == 403 and again.json()["error"]["code"] == "invalid_link"
    assert (await me.link_to({"Authorization": f"Bearer {key['key']}"})).status_code == 200
    # Opening a link takes a credential; a bad code links nobody.
    stranger = slack.person("USTRANGER")
    assert (await stranger.link_to({})).status_code == 401
    for bad in ("x" * 16, "y" * 43):
        refused = await http.get(f"/slack/link/{bad}", headers=auth(alice))
        assert refused.status_code == 403, refused.text
    async with slack.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM slack_users WHERE slack_user = $1",
                                   "USTRANGER") == 0

    run_id = await start_validation(http, alice)
    gate = await pending(http, run_id, alice)
    message = await slack.message_for(gate["request_id"])
    revoked = await http.delete(f"/api-keys/{key['key_id']}", headers=auth(alice))
    assert revoked.status_code == 204, revoked.text
    await _refused(slack, me, message, "not linked")

    signed_in = auth(alice)  # a token of before the erasure
    assert (await me.link_to(signed_in)).status_code == 200
    # The click as the message offered it before the erasure (which cancels the run, and so
    # updates the message to say the request is gone).
    click = me.click_body(message, "approve")
    erased = await http.post("/admin/erasure", headers=auth_service(), json={"user": alice})
    assert erased.status_code == 202, erased.text
    await slack.updated(message, "no longer asked")
    before = len(stub.ephemerals)
    assert (await me.post(click)).status_code == 200
    told = await eventually(lambda: _nth(stub.ephemerals, before))
    assert "not linked" in told["text"], told
    async with slack.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM slack_users WHERE user_name = $1",
                                   alice) == 0
    # An erased user's token links nothing any more (one signed after the erasure is a new
    # sign-in: its `iat` is past the cut-off, and it counts).
    assert (await me.link_to(signed_in)).status_code == 401
    assert await slack.written(gate["request_id"]) != ("approved", 1)
    assert not [e for e in stub.ephemerals if "approved" in e["text"]]


def auth_service() -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(SECRET, 'ops', role='service')}"}


async def _refused(slack: Stack, person: SlackPerson, message: Message, why: str) -> None:
    before = len(slack.stub.ephemerals)
    assert (await person.click(message, "approve")).status_code == 200
    told = await eventually(lambda: _nth(slack.stub.ephemerals, before))
    assert told["user"] == person.slack_id and why in told["text"], told


async def test_reminders_are_thread_replies_and_deciders_get_dms(slack: Stack, pool):
    """The channel's own sync (as the worker runs it) on a gate whose reminders and escalation
    the workflow recorded: one thread reply each, once; a DM to each linked decider; the
    kind's own channel."""
    http, stub = slack.http, slack.stub
    alice = f"alice-{uuid.uuid4().hex[:6]}"
    me = slack.person("UALICE")
    assert (await me.link_to(auth(alice))).status_code == 200
    run_id = await start_validation(http, alice)
    gate = await pending(http, run_id, alice)
    message = await slack.message_for(gate["request_id"])
    async with pool.acquire() as conn:
        await conn.execute("UPDATE hitl_requests SET reminders_sent = 2, escalated_at = now() "
                           "WHERE id = $1", uuid.UUID(gate["request_id"]))
    # Now with a channel for the kind, and DMs: both posted, their threads starting now.
    channel = SlackActivities(pool, SlackConfig(
        bot_token=TOKEN, api_url=stub.url, channel=CHANNEL,
        channels={"kind:validation": "CKIND", "kind:agent": "CAGENT"}, dm_deciders=True))
    done = await channel.sync(SlackSyncInput(run_id=uuid.UUID(run_id)))
    assert done.replies == 2 + 1 and done.posted == 2
    replies = [m.text for m in stub.replies(message.ts)]
    assert [r.split(":")[0] for r in replies] == ["Reminder 1", "Reminder 2", "Escalated"]
    for where in ("DUALICE", "CKIND"):
        shown = [m for m in stub.top_level() if m.channel == where]
        assert len(shown) == 1 and buttons(shown[0]) and not stub.replies(shown[0].ts)
    assert not [m for m in stub.top_level() if m.channel == "CAGENT"]
    again = await channel.sync(SlackSyncInput(run_id=uuid.UUID(run_id)))
    assert again.posted == again.updated == again.replies == 0


async def test_clicks_count_against_the_linked_user_s_write_limit(migrated_url, dev_env, pool,
                                                                   task_queue):
    async with slack_stack(migrated_url, dev_env, pool, task_queue,
                           writes_per_minute=4) as slack:
        http, stub = slack.http, slack.stub
        alice = f"alice-{uuid.uuid4().hex[:6]}"
        run_id = await start_validation(http, alice)  # write 1
        gate = await pending(http, run_id, alice)
        message = await slack.message_for(gate["request_id"])
        me = slack.person("UALICE")
        assert (await me.link_to(auth(alice))).status_code == 200  # write 2
        # Rejecting opens the reason's modal: writes 3 and 4; the third click is one too many.
        for opened in (1, 2):
            assert (await me.click(message, "reject")).status_code == 200
            await eventually(lambda n=opened: asyncio.sleep(0, len(stub.views) >= n))
        assert (await me.click(message, "reject")).status_code == 200
        told = await eventually(lambda: _nth(stub.ephemerals, 1))  # after the link's
        assert "too many writes" in told["text"], told
        assert len(stub.views) == 2
        assert await slack.written(gate["request_id"]) == ("pending", 0)

"""A request as a Slack message within Slack's limits, and Slack's answers sorted into what a
retry may mend: checked against the Web API stand-in (tests/slack_stub.py), which refuses what
Slack refuses."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from tests.slack_stub import TOKEN, SlackStub
from waystation.activities.slack.blocks import (
    MAX_BLOCKS,
    SECTION_TEXT_LIMIT,
    ButtonValue,
    gate_message,
)
from waystation.activities.slack.posted import PostKey, posted_since
from waystation.activities.slack.web_api import (
    SlackConfig,
    SlackError,
    SlackRateLimited,
    SlackRefused,
    SlackWebApi,
)
from waystation.api.protocols.slack.modals import ModalContext, decision_modal, read_submission
from waystation.persistence.models import GateRow, RunRow

NOW = datetime(2026, 11, 28, tzinfo=UTC)


def run() -> RunRow:
    return RunRow.model_validate({
        "id": uuid.uuid4(), "kind": "agent", "owner": "priya", "group_id": None,
        "project_id": None, "workflow_id": "agent-x", "status": "paused", "current_phase": 1,
        "phase_name": "turn 1", "hitl_state": None, "hitl_checkpoint_at": None, "input": {},
        "result": None, "error_message": None, "last_seq": 3, "created_at": NOW,
        "started_at": NOW, "updated_at": NOW, "completed_at": None, "finished_at": None,
        "stop_reason": None})


def gate(**fields) -> GateRow:
    return GateRow.model_validate({
        "id": uuid.uuid4(), "run_id": uuid.uuid4(), "checkpoint_name": "approve_book_1",
        "phase": 1, "title": "Allow book_vendor?", "description": "Book it.",
        "context": {"tool": "book_vendor", "arguments": {"guests": 200}},
        "options": [{"value": "approve", "label": "Run it"},
                    {"value": "reject", "label": "Do not run it"},
                    {"value": "edit", "label": "Edit", "answer": "required"}],
        "recommended_option": "approve", "digest": "a" * 64, "expiry_policy": "pause",
        "default_option": None, "status": "pending", "decision": None, "feedback": None,
        "decision_at": None, "decision_by": None, "expires_at": NOW + timedelta(days=1),
        "created_at": NOW, "updated_at": NOW,
        "answer_schema": {"type": "object", "properties": {
            "guests": {"type": "integer", "minimum": 1}, "date": {"type": "string"}},
            "required": ["guests"]},
        "answer_initial": {"guests": 200}} | fields)


@pytest.fixture
def stub() -> Iterator[SlackStub]:
    with SlackStub() as running:
        yield running


def api(stub: SlackStub, token: str = TOKEN) -> SlackWebApi:
    return SlackWebApi(SlackConfig(bot_token=token, api_url=stub.url))


async def test_a_huge_request_still_fits_slacks_limits(stub: SlackStub):
    huge = gate(description="x" * 20_000, title="T" * 5_000,
                options=[{"value": f"o{i}", "label": "L" * 200} for i in range(60)],
                context={f"k{i}": i for i in range(100)} | {"reason": "r" * 9_000})
    message = gate_message(huge, run(), None, SlackConfig(bot_token=TOKEN))
    assert len(message.blocks) <= MAX_BLOCKS
    for block in message.blocks:
        for text in [block.get("text", {})] + block.get("elements", []):
            assert len(text.get("text", "") if isinstance(text.get("text"), str)
                       else text.get("text", {}).get("text", "")) <= SECTION_TEXT_LIMIT
    assert len([e for b in message.blocks for e in b.get("elements", [])
                if e.get("type") == "button"]) == 60
    sent = await api(stub).call("chat.postMessage", channel="C1", text=message.text,
                                blocks=message.blocks)
    assert sent["ok"] and stub.top_level()[0].blocks == message.blocks


async def test_slack_answers_are_sorted_for_retries(stub: SlackStub):
    too_many = [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}] * 51
    with pytest.raises(SlackRefused, match="invalid_blocks"):
        await api(stub).call("chat.postMessage", channel="C1", text="t", blocks=too_many)
    with pytest.raises(SlackRefused, match="message_not_found"):
        await api(stub).call("chat.update", channel="C1", ts="1.2", text="t")
    # A wrong token may be mended by an operator: retried.
    with pytest.raises(SlackError, match="invalid_auth") as bad_token:
        await api(stub, "xoxb-wrong").call("chat.postMessage", channel="C1", text="t")
    assert not isinstance(bad_token.value, SlackRefused)
    stub.retry_after = 7
    stub.outage(5, status=429)
    with pytest.raises(SlackRateLimited) as limited:
        await api(stub).call("chat.postMessage", channel="C1", text="t")
    assert limited.value.retry_after == 7
    stub.outage(5, status=500)
    with pytest.raises(SlackError) as down:
        await api(stub).call("chat.postMessage", channel="C1", text="t")
    assert not isinstance(down.value, (SlackRefused, SlackRateLimited))
    stub.outage(0)
    # The stand-in's own rate limit, per method (Slack's tiers): the third call in a second.
    stub.per_second = 2
    answers = []
    for _ in range(3):
        try:
            answers.append((await api(stub).call("chat.postEphemeral", channel="C1",
                                                  user="U1", text="t"))["ok"])
        except SlackRateLimited:
            answers.append("429")
    assert answers == [True, True, "429"]


def test_the_modal_is_the_answer_schema_and_shows_its_errors():
    request = gate()
    button = ButtonValue(request_id=request.id, option="edit", digest=request.digest)
    modal = decision_modal(request, "edit", ModalContext(button=button, channel="C1"))
    inputs = {b["block_id"]: b for b in modal["blocks"] if b["type"] == "input"}
    assert list(inputs) == ["answer.guests", "answer.date", "feedback"]
    assert inputs["answer.guests"]["optional"] is False and inputs["answer.date"]["optional"]
    assert ModalContext.model_validate_json(modal["private_metadata"]).button == button

    def values(**typed: str) -> dict:
        return {f"answer.{k}": {"value": {"type": "plain_text_input", "value": v}}
                for k, v in typed.items()}
    assert read_submission(request, "edit", values(guests="many")).errors == {
        "answer.guests": "must be of type integer"}
    low = read_submission(request, "edit", values(guests="0"))
    assert list(low.errors) == ["answer.guests"] and "minimum" in low.errors["answer.guests"]
    fine = read_submission(request, "edit", values(guests="150", date="2027-02-14"))
    assert fine.errors == {} and fine.answer == {"guests": 150, "date": "2027-02-14"}
    # A rejection asks why; a plain option carries no answer.
    reject = decision_modal(request, "reject", ModalContext(button=button, channel=None))
    assert [b["block_id"] for b in reject["blocks"] if b["type"] == "input"] == ["feedback"]
    assert read_submission(request, "approve", {}).answer is None
    json.dumps(modal)  # what views.open sends


async def test_the_stand_in_reads_messages_back_as_slack_does(stub: SlackStub):
    """conversations.history and conversations.replies: newest first (a thread oldest first,
    its parent first), pages with cursors, metadata only when asked for, Slack's refusals."""
    slack = api(stub)
    posted = [(await slack.call("chat.postMessage", channel="C1", text=f"m{i}",
                                metadata={"event_type": "t", "event_payload": {"i": i}}))["ts"]
              for i in range(5)]
    await slack.call("chat.postMessage", channel="C2", text="elsewhere")
    reply = await slack.call("chat.postMessage", channel="C1", thread_ts=posted[0], text="r",
                             metadata={"event_type": "t", "event_payload": {"i": 9}})
    pages, cursor = [], None
    while True:
        page = await slack.read("conversations.history", channel="C1", limit=2,
                                include_all_metadata=True, **({"cursor": cursor} if cursor else {}))
        pages.append([m["metadata"]["event_payload"]["i"] for m in page["messages"]])
        cursor = (page.get("response_metadata") or {}).get("next_cursor")
        if not page["has_more"]:
            break
    assert pages == [[4, 3], [2, 1], [0]]  # the thread's reply is not the channel's
    plain = await slack.read("conversations.history", channel="C1")
    assert [m["ts"] for m in plain["messages"]] == posted[::-1]
    assert all("metadata" not in m for m in plain["messages"])
    since = await slack.read("conversations.history", channel="C1", oldest=posted[2])
    assert [m["ts"] for m in since["messages"]] == posted[:2:-1]
    thread = await slack.read("conversations.replies", channel="C1", ts=posted[0],
                              include_all_metadata=True)
    assert [m["ts"] for m in thread["messages"]] == [posted[0], reply["ts"]]
    assert thread["messages"][1]["metadata"]["event_payload"] == {"i": 9}

    for method, args, error in (
            ("conversations.history", {"channel": "C1", "cursor": "bm9wZQ=="}, "invalid_cursor"),
            ("conversations.history", {"channel": "C1", "oldest": "soon"}, "invalid_ts_oldest"),
            ("conversations.replies", {"channel": "C1", "ts": "1.2"}, "thread_not_found")):
        with pytest.raises(SlackError, match=error):
            await slack.read(method, **args)
    with pytest.raises(SlackRefused, match="invalid_metadata_format"):
        await slack.call("chat.postMessage", channel="C1", text="t", metadata={"event_type": ""})
    stub.outside_channels.add("C1")
    with pytest.raises(SlackRefused, match="not_in_channel"):
        await slack.read("conversations.history", channel="C1")
    stub.scopes.discard("im:history")
    with pytest.raises(SlackError, match="missing_scope"):
        await slack.read("conversations.history", channel="DUALICE")


async def test_a_lost_post_is_found_by_its_metadata_across_pages(stub: SlackStub):
    slack, since = api(stub), datetime.now(UTC)
    keys = [PostKey(request_id=str(uuid.uuid4()), audience="C1", what="gate"),
            PostKey(request_id=str(uuid.uuid4()), audience="C1", what="reminder", number=2)]
    gate_post = await slack.call("chat.postMessage", channel="C1", text="gate",
                                 metadata=keys[0].metadata())
    for i in range(5):  # others' messages, some with metadata of their own
        await slack.call("chat.postMessage", channel="C1", text=f"chat {i}",
                         metadata={"event_type": "other_app", "event_payload": {"i": i}})
    reply = await slack.call("chat.postMessage", channel="C1", thread_ts=gate_post["ts"],
                             text="Reminder 2", metadata=keys[1].metadata())
    assert await posted_since(slack, "C1", since, page=2) == {keys[0]: gate_post["ts"]}
    assert await posted_since(slack, "C1", since, thread_ts=gate_post["ts"], page=1) == {
        keys[0]: gate_post["ts"], keys[1]: reply["ts"]}
    # Nothing since a later time (the clock margin aside); no reading allowed: None.
    assert await posted_since(slack, "C1", since + timedelta(minutes=5)) == {}
    stub.scopes.discard("channels:history")
    assert await posted_since(slack, "C1", since) is None

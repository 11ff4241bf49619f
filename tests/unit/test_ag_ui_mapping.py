"""The AG-UI mapping on its own (no servers): steps of every kind, CUSTOM for the rest, JSON
Patch between snapshots, the ids, and the framing that keeps an AG-UI run well-formed."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from ag_ui.core import (
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)

from waystation.api.protocols.ag_ui.mapping import (
    LiveMessages,
    Position,
    RunFraming,
    json_patch,
    live_message_id,
    positions,
    state_event,
    translate,
)
from waystation.api.schemas import EventView, MessageDelta

AT = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def event(seq: int, type: str, **fields: Any) -> EventView:
    values: dict[str, Any] = {"phase": None, "crew": None, "task": None, "agent": None,
                              "status": None, "progress_pct": None, "output": None,
                              "error_message": None, "duration_ms": None, **fields}
    return EventView(seq=seq, type=type, created_at=AT, **values)


def shapes(events: list[Any]) -> list[tuple[str, str | None]]:
    return [(e.type.value, getattr(e, "step_name", None) or getattr(e, "name", None))
            for e in events]


def test_steps_of_every_kind_and_custom_for_the_rest():
    assert shapes(translate(event(1, "phase.started", phase=1), [])) == [
        ("STEP_STARTED", "phase 1")]
    assert shapes(translate(event(2, "task.completed", phase=1, task="fit"), [])) == [
        ("STEP_FINISHED", "phase 1 · fit")]
    failed = translate(event(3, "item.failed", error_message="boom", status="failed",
                             output={"ordinal": 7, "failed": 1}), [])
    assert shapes(failed) == [("STEP_STARTED", "item 7"), ("STEP_FINISHED", "item 7")]
    assert failed[1].metadata == {"status": "failed", "error": "boom"}
    assert shapes(translate(event(4, "agent.node.completed", task="act",
                                  output={"step": 12}), [])) == [
        ("STEP_STARTED", "step 12 · act"), ("STEP_FINISHED", "step 12 · act")]
    [custom] = translate(event(5, "job.progress", progress_pct=40), [])
    assert shapes([custom]) == [("CUSTOM", "waystation.job.progress")]
    assert custom.value["progress_pct"] == 40 and custom.timestamp == int(AT.timestamp() * 1000)


def test_json_patch_between_snapshots():
    before = {"phase": 1, "a/b": {"x": 1}, "gone": True, "list": [1, 2], "flag": 1}
    after = {"phase": 2, "a/b": {"x": 1, "y": None}, "list": [1, 2, 3], "flag": True, "new": {}}
    assert json_patch(before, after) == [
        {"op": "remove", "path": "/gone"},
        {"op": "replace", "path": "/phase", "value": 2},
        {"op": "add", "path": "/a~1b/y", "value": None},
        {"op": "replace", "path": "/list", "value": [1, 2, 3]},
        {"op": "replace", "path": "/flag", "value": True},
        {"op": "add", "path": "/new", "value": {}},
    ]
    assert state_event(None, after).type.value == "STATE_SNAPSHOT"
    assert state_event(before, before).delta == []


def test_ids_name_one_place_in_every_stream():
    assert [str(p) for p in positions(9, 3)] == ["9.0", "9.1", "9"]
    assert Position.parse("9.1") == Position(9, 1) and Position.parse(" 12 ") == Position(12)
    for bad in ("", "x", "1.", "1.a", "-1", "1.2.3"):
        with pytest.raises(ValueError):
            Position.parse(bad)


def test_framing_keeps_each_ag_ui_run_well_formed():
    framing = RunFraming()
    # A step that ends here but began before this response is begun first.
    assert shapes(framing.before(StepFinishedEvent(step_name="phase 1"))) == [
        ("STEP_STARTED", "phase 1")]
    # A step begun again is finished in between; one still open is finished at the end.
    framing.before(StepStartedEvent(step_name="phase 2"))
    assert shapes(framing.before(StepStartedEvent(step_name="phase 2"))) == [
        ("STEP_FINISHED", "phase 2")]
    assert shapes(framing.closing()) == [("STEP_FINISHED", "phase 2")]
    # A message whose start was sent before a reconnection is opened again.
    start = TextMessageStartEvent(message_id="ws-4", role="assistant")
    framing.skip(start)
    assert framing.before(TextMessageContentEvent(message_id="ws-4", delta="hi")) == [start]
    assert framing.before(TextMessageEndEvent(message_id="ws-4")) == []


def _delta(delta: str, at: int, attempt: int = 1, **fields: Any) -> MessageDelta:
    return MessageDelta(run_id=uuid.UUID(int=1), message_id="r.7", attempt=attempt, at=at,
                        delta=delta, **fields)


def test_live_deltas_send_only_what_the_client_has_not_got():
    live = LiveMessages()
    first = live.events(_delta("Old Mill ", 0))
    assert [type(e).__name__ for e in first] == ["TextMessageStartEvent",
                                                 "TextMessageContentEvent"]
    assert first[0].message_id == live_message_id("r.7")
    # A catch-up repeats the message whole so far: only its new end goes out.
    again = live.events(_delta("Old Mill Barn", 0))
    assert [e.delta for e in again] == ["Barn"]
    assert live.events(_delta("far ahead", 40)) == []  # a gap: wait for the whole again
    # The durable answer: its START is not repeated, its CONTENT only what is missing.
    answered = [TextMessageStartEvent(message_id=live_message_id("r.7"), role="assistant"),
                TextMessageContentEvent(message_id=live_message_id("r.7"),
                                        delta="Old Mill Barn fits."),
                TextMessageEndEvent(message_id=live_message_id("r.7"))]
    kept = [k for e in answered for k in live.durable(e)]
    assert [getattr(k, "delta", None) for k in kept] == [" fits.", None]
    assert live.events(_delta(" late", 13)) == []  # ended: a late delta is dropped


def test_a_reset_drops_the_failed_attempt_and_the_retry_starts_anew():
    live = LiveMessages()
    live.events(_delta("Wrong answ", 0))
    assert not live.reset(_delta("er", 10))
    assert live.reset(_delta("", 0, attempt=2, reset=True))
    started = live.events(_delta("Right", 0, attempt=2))
    assert [type(e).__name__ for e in started] == ["TextMessageStartEvent",
                                                   "TextMessageContentEvent"]
    assert live.events(_delta("stale", 10, attempt=1)) == []


def test_tool_arguments_written_live_are_not_sent_again_by_the_durable_call():
    live = LiveMessages()
    live.events(_delta('{"category":', 0, call_id="c1", tool="search_vendors"))
    live.events(_delta('"venue"}', 12, call_id="c1", tool="search_vendors"))
    durable = [ToolCallStartEvent(tool_call_id="c1", tool_call_name="search_vendors"),
               ToolCallArgsEvent(tool_call_id="c1", delta='{"category": "venue"}'),
               ToolCallEndEvent(tool_call_id="c1")]
    assert [type(k).__name__ for e in durable for k in live.durable(e)] == ["ToolCallEndEvent"]

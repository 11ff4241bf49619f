"""Waystation's read model as AG-UI 1.0 events: a run event as the AG-UI events it stands for,
a pending request as an interrupt, the transcript as messages, two snapshots as a JSON Patch,
and the framing that keeps each AG-UI run well-formed. The table is in docs/ag-ui.md.

`translate` is a pure function of the run event (and the snapshots written with it), so one run
event always gives the same AG-UI events, in the same number: the SSE ids (`seq`, or `seq.n`
for the events before the last one of run event `seq`) then name one place in every stream of
the thread, and a reconnection with `Last-Event-ID` resumes exactly there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    FunctionCall,
    Interrupt,
    Message,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)

from waystation.api.decision_payload import payload_schema
from waystation.api.live_deltas import Shown
from waystation.api.schemas import DecisionView, EventView, MessageDelta, TranscriptEntry
from waystation.contracts.events import (
    AGENT_ANSWERED,
    MESSAGE_RECEIVED,
    TOOL_CALLED,
    TOOL_RETRY,
    TOOL_RETURNED,
)

# The AG-UI id of a transcript line's message: its run event's seq after this.
MESSAGE_ID_PREFIX = "ws-"
# CUSTOM events are named after the run event they carry: `waystation.<type>`.
CUSTOM_PREFIX = "waystation."
# Events that begin or end a step; a mobile step's nodes and a batch item report only their end,
# so they give both at once.
STEP_STARTS = {"phase.started", "task.started"}
STEP_ENDS = {"phase.completed", "task.completed"}
ONE_EVENT_STEPS = {"item.failed", "agent.node.completed", "agent.node.failed"}


@dataclass(frozen=True, slots=True)
class Position:
    """Where a stream of a thread stands: after run event `seq` (`index` None), or after the
    AG-UI event `index` of those run event `seq` gives (SSE id `seq.index`)."""

    seq: int
    index: int | None = None

    @classmethod
    def parse(cls, text: str) -> Position:
        seq, dot, index = text.strip().partition(".")
        if not seq.isdigit() or (dot and not index.isdigit()):
            raise ValueError("Last-Event-ID must be `seq` or `seq.n`, as this stream sent it")
        return cls(int(seq), int(index) if dot else None)

    def __str__(self) -> str:
        return str(self.seq) if self.index is None else f"{self.seq}.{self.index}"


def positions(seq: int, count: int) -> list[Position]:
    """The ids of the `count` AG-UI events run event `seq` gives: the last is `seq` itself (the
    run event has been sent whole), those before it `seq.0`, `seq.1`, ..."""
    return [Position(seq, i) for i in range(count - 1)] + [Position(seq)]


def message_id(seq: int) -> str:
    """A transcript line's AG-UI message id (a tool call's message is named by its call id)."""
    return f"{MESSAGE_ID_PREFIX}{seq}"


def translate(event: EventView, states: list[BaseEvent]) -> list[BaseEvent]:
    """The AG-UI events run event `event` stands for, followed by `states` (the STATE_SNAPSHOT
    or STATE_DELTA of each snapshot written with it); never none."""
    out = event.output if isinstance(event.output, dict) else {}
    events = _step(event, out) or _conversation(event, out) or [
        CustomEvent(name=CUSTOM_PREFIX + event.type, value=event.model_dump(mode="json"))]
    at = _millis(event.created_at)
    for each in events:
        each.timestamp = at
    return [*events, *states]


def _step(event: EventView, out: dict[str, Any]) -> list[BaseEvent] | None:
    if event.type in STEP_STARTS:
        return [StepStartedEvent(step_name=_step_name(event, out))]
    if event.type in STEP_ENDS:
        return [StepFinishedEvent(step_name=_step_name(event, out))]
    if event.type in ONE_EVENT_STEPS:
        name = _step_name(event, out)
        detail = {"status": event.status, "error": event.error_message} \
            if event.error_message else None
        return [StepStartedEvent(step_name=name),
                StepFinishedEvent(step_name=name, metadata=detail)]
    return None


def _step_name(event: EventView, out: dict[str, Any]) -> str:
    """The same name for a step's start and end: what the step is, where in the run."""
    if event.type.startswith("phase."):
        return f"phase {event.phase}"
    if event.type.startswith("task."):
        return f"phase {event.phase} · {event.task}"
    if event.type == "item.failed":
        return f"item {out.get('ordinal')}"
    step = out.get("step")
    return f"step {step} · {event.task}" if step is not None else f"step · {event.task}"


def _conversation(event: EventView, out: dict[str, Any]) -> list[BaseEvent] | None:
    if event.type in (MESSAGE_RECEIVED, AGENT_ANSWERED):
        role = "user" if event.type == MESSAGE_RECEIVED else "assistant"
        # An answer written live keeps the id its deltas were sent under (LiveMessages).
        id = live_message_id(out["message_id"]) if out.get("message_id") \
            else message_id(event.seq)
        return _text(id, role, str(out.get("text") or ""),
                     out.get("sent_by") if role == "user" else None)
    call_id = str(out.get("call_id") or "")
    if event.type == TOOL_CALLED and call_id:
        return [ToolCallStartEvent(tool_call_id=call_id, tool_call_name=str(out.get("tool"))),
                ToolCallArgsEvent(tool_call_id=call_id,
                                  delta=json.dumps(out.get("arguments") or {})),
                ToolCallEndEvent(tool_call_id=call_id)]
    if event.type in (TOOL_RETURNED, TOOL_RETRY) and call_id:
        result = out.get("result", out.get("told"))
        return [ToolCallResultEvent(message_id=message_id(event.seq), tool_call_id=call_id,
                                    content=_content(result), role="tool")]
    return None


def _text(id: str, role: str, text: str, name: str | None) -> list[BaseEvent]:
    # Whole: what live deltas already sent of it is cut by the stream (LiveMessages.durable);
    # a CONTENT event may not be empty.
    content: list[BaseEvent] = [TextMessageContentEvent(message_id=id, delta=text)] \
        if text else []
    return [TextMessageStartEvent(message_id=id, role=role, name=name), *content,
            TextMessageEndEvent(message_id=id)]


def _content(result: Any) -> str:
    return result if isinstance(result, str) else json.dumps(result)


def _millis(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def interrupt(view: DecisionView) -> Interrupt:
    """A pending request as an AG-UI interrupt: answered by a resume entry whose payload is the
    body `POST /runs/{id}/decisions/{checkpoint}` takes."""
    call_id = view.context.get("call_id")
    if isinstance(call_id, str):
        reason = "tool_call"
    elif any(option.answer == "required" for option in view.options):
        reason = "input_required"
    else:
        reason = "confirmation"
    return Interrupt(
        id=str(view.request_id), reason=reason,
        message=f"{view.title}\n\n{view.description}",
        tool_call_id=call_id if isinstance(call_id, str) else None,
        response_schema=payload_schema(view),
        expires_at=view.expires_at.isoformat() if view.expires_at else None,
        metadata={"runId": str(view.run_id), "checkpoint": view.checkpoint_name,
                  "digest": view.digest,
                  "options": [o.model_dump(mode="json") for o in view.options],
                  "recommendation": view.recommended_option,
                  "quorum": view.quorum, "votes": len(view.votes),
                  "answerInitial": view.answer_initial, "context": view.context})


def messages(entries: list[TranscriptEntry]) -> list[Message]:
    """An agent run's transcript as AG-UI messages, with the ids its events are streamed with."""
    found: list[Message] = []
    for entry in entries:
        if entry.type == MESSAGE_RECEIVED:
            found.append(UserMessage(id=message_id(entry.seq), content=entry.text or "",
                                     name=entry.sent_by))
        elif entry.type == AGENT_ANSWERED:
            found.append(AssistantMessage(id=message_id(entry.seq), content=entry.text or ""))
        elif entry.type == TOOL_CALLED and entry.call_id:
            found.append(AssistantMessage(id=entry.call_id, tool_calls=[ToolCall(
                id=entry.call_id, function=FunctionCall(
                    name=entry.tool or "", arguments=json.dumps(entry.arguments or {})))]))
        elif entry.type in (TOOL_RETURNED, TOOL_RETRY) and entry.call_id:
            found.append(ToolMessage(id=message_id(entry.seq), tool_call_id=entry.call_id,
                                     content=_content(entry.result)))
    return found


def state_event(before: dict[str, Any] | None, after: dict[str, Any]) -> BaseEvent:
    """The client's state moved from `before` (None: it has none) to `after`."""
    if before is None:
        return StateSnapshotEvent(snapshot=after)
    return StateDeltaEvent(delta=json_patch(before, after))


def json_patch(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """RFC 6902 operations turning `before` into `after`: objects key by key, anything else
    (arrays included) replaced whole when it differs."""
    if isinstance(before, dict) and isinstance(after, dict):
        ops: list[dict[str, Any]] = [{"op": "remove", "path": f"{path}/{_escape(key)}"}
                                     for key in sorted(before.keys() - after.keys())]
        for key, value in after.items():
            at = f"{path}/{_escape(key)}"
            if key in before:
                ops += json_patch(before[key], value, at)
            else:
                ops.append({"op": "add", "path": at, "value": value})
        return ops
    # `1 == True` in Python, not in JSON: a change of type is a change.
    if type(before) is type(after) and before == after:
        return []
    return [{"op": "replace", "path": path, "value": after}]


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


@dataclass
class RunFraming:
    """Keeps one AG-UI run well-formed (what `@ag-ui/client` verifies) whatever point of the
    thread its response starts from: a step that ends here but began before is begun first, a
    step begun twice is finished in between, a message or tool call whose opening event was sent
    before a reconnection is opened again, and steps still open when the run ends are finished.
    None of this is a run event: each repeats the id before it, so it moves no position."""

    steps: set[str] = field(default_factory=set)
    open_messages: set[str] = field(default_factory=set)
    openers: dict[str, BaseEvent] = field(default_factory=dict)

    def skip(self, event: BaseEvent) -> None:
        """`event` was sent before the reconnection this response continues."""
        if isinstance(event, TextMessageStartEvent):
            self.openers[event.message_id] = event
        elif isinstance(event, ToolCallStartEvent):
            self.openers[event.tool_call_id] = event

    def before(self, event: BaseEvent) -> list[BaseEvent]:
        """What must go out before `event`."""
        added: list[BaseEvent] = []
        if isinstance(event, StepStartedEvent):
            if event.step_name in self.steps:
                added.append(StepFinishedEvent(step_name=event.step_name))
            self.steps.add(event.step_name)
            return added
        if isinstance(event, StepFinishedEvent):
            if event.step_name not in self.steps:
                added.append(StepStartedEvent(step_name=event.step_name))
            self.steps.discard(event.step_name)
            return added
        key = _opened_by(event)
        if key is None:
            return []
        if isinstance(event, TextMessageStartEvent | ToolCallStartEvent):
            self.open_messages.add(key)
            return []
        if key not in self.open_messages and key in self.openers:
            added.append(self.openers[key])
        self.open_messages.add(key)
        if isinstance(event, TextMessageEndEvent | ToolCallEndEvent):
            self.open_messages.discard(key)
        return added

    def closing(self) -> list[BaseEvent]:
        """What must go out before RUN_FINISHED: the steps still open finished."""
        closed: list[BaseEvent] = [StepFinishedEvent(step_name=name)
                                   for name in sorted(self.steps)]
        self.steps.clear()
        return closed


def _opened_by(event: BaseEvent) -> str | None:
    if isinstance(event, TextMessageStartEvent | TextMessageContentEvent | TextMessageEndEvent):
        return event.message_id
    if isinstance(event, ToolCallStartEvent | ToolCallArgsEvent | ToolCallEndEvent):
        return event.tool_call_id
    return None


def live_message_id(message_id: str) -> str:
    """The AG-UI id of a message being written: its model request's id, which its durable
    answer carries too (`agent.answered`'s `message_id`)."""
    return f"{MESSAGE_ID_PREFIX}{message_id}"


@dataclass
class LiveMessages:
    """Issue 43's live tokens on one AG-UI response: each `MessageDelta` as the text-message or
    tool-call events it adds (only what the client lacks: `Shown`), and the durable events of
    those messages cut to what is still missing (their START and what the deltas sent are not
    sent twice). A reset leaves the stream to drop the failed attempt's message (a
    MESSAGES_SNAPSHOT without it)."""

    shown: Shown = field(default_factory=Shown)
    args: dict[str, str] = field(default_factory=dict)  # call id -> arguments sent

    def reset(self, delta: MessageDelta) -> bool:
        if not self.shown.reset(delta):
            return False
        self.args.clear()
        return True

    def events(self, delta: MessageDelta) -> list[BaseEvent]:
        key = delta.call_id or live_message_id(delta.message_id)
        new = self.shown.new(key, delta)
        if new is None:
            return []
        first, text = new
        start: list[BaseEvent] = []
        if first:
            start = [ToolCallStartEvent(tool_call_id=key, tool_call_name=delta.tool or "")
                     if delta.call_id else TextMessageStartEvent(message_id=key,
                                                                 role="assistant")]
        if delta.call_id:
            self.args[key] = self.args.get(key, "") + text
        if not text:
            return start
        more: BaseEvent = ToolCallArgsEvent(tool_call_id=key, delta=text) if delta.call_id \
            else TextMessageContentEvent(message_id=key, delta=text)
        return [*start, more]

    def durable(self, event: BaseEvent) -> list[BaseEvent]:
        """What of a durable event's AG-UI event is still to be sent."""
        key = _opened_by(event)
        sent = self.shown.sent
        if key is None or key not in sent:
            return [event]
        if isinstance(event, TextMessageStartEvent | ToolCallStartEvent):
            return []
        if isinstance(event, ToolCallArgsEvent) and key in self.args \
                and _same_json(self.args[key], event.delta):
            return []  # the same arguments, as the model wrote them
        if isinstance(event, TextMessageContentEvent | ToolCallArgsEvent):
            rest = event.delta[sent[key]:]
            sent[key] += len(rest)
            return [event.model_copy(update={"delta": rest})] if rest else []
        self.shown.end(key)
        self.args.pop(key, None)
        return [event]


def _same_json(one: str, other: str) -> bool:
    try:
        return bool(json.loads(one) == json.loads(other))
    except ValueError:
        return False

"""Where an agent turn's time goes, read from AgentRun's workflow histories, beside the dev
server's floor (one empty regular activity, one empty local activity) measured in the same run.

A turn is the span of history from the `post_message` Update's acceptance to the last event
before the next message (or the history's end). In it:
- each regular activity from scheduled to completed, by kind: the agent's model requests, its
  tool calls, and the summary request (the turn's last model request); split into the wait
  for a worker to take it (scheduled → started: the server's queue and the worker's poll) and
  its run (started → completed: the call, payload conversion in the worker, the reply);
- workflow tasks from scheduled to completed: the workflow's own code, and the recorder's
  event writes, which run as local activities inside them (one marker each); of them, on
  their own, the message's (from the Update to the first model request scheduled) and the
  turn's last (from the summary request's result to the answer written);
- payload conversion: the turn's activity inputs and results decoded and encoded again here
  by the data converter (JSON only: the worker's typed validation comes on top);
- the rest: the turn's span less the above (the gaps between them: history writes, polls).

Used by `python -m bench.bench_agent --breakdown`.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.worker import Worker

from bench.common import RAW_TIMEOUT, markdown_table, raw_task

MODEL, TOOL, SUMMARY = "model request", "tool call", "summary request"
QUEUE_WAIT, RUNNING = "scheduled → started", "started → completed"
FLOOR_ACTIVITIES = 20
# The workflow tasks before the turn's first model request and after its summary request.
MESSAGE_TASK = "of which the message's workflow task (Update → first model request)"
END_TASK = "of which the turn's last workflow task (summary request → answer written)"


@dataclass
class Turn:
    """Milliseconds by part of one turn, and how many of each."""
    span: float = 0.0
    parts: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    # Two of the workflow tasks above, on their own (already counted in `parts`).
    within: dict[str, float] = field(default_factory=dict)


def _ms(event: HistoryEvent) -> float:
    return event.event_time.ToMicroseconds() / 1000


def _kind(activity_type: str) -> str:
    if "model_request" in activity_type or "request" in activity_type.rsplit("__", 1)[-1]:
        return MODEL
    if "tool" in activity_type:
        return TOOL
    return activity_type


def turns_of(events: list[HistoryEvent]) -> list[Turn]:
    """The turns of one AgentRun's history (see the module)."""
    starts = [i for i, e in enumerate(events)
              if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED]
    turns = []
    for n, first in enumerate(starts):
        last = (starts[n + 1] if n + 1 < len(starts) else len(events)) - 1
        turn = _turn(events[first:last + 1])
        # The Update's own workflow task completed just before its acceptance was recorded:
        # in the history, it ends the turn before.
        message = next((e for e in reversed(events[:first])
                        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), None)
        if message is not None:
            turn.within[MESSAGE_TASK] = _task_ms(events, message)
        turns.append(turn)
    return turns


def _task_ms(events: list[HistoryEvent], completed: HistoryEvent) -> float:
    """A workflow task's started → completed (the worker's: its code and local activities)."""
    started = next(e for e in events
                   if e.event_id == completed.workflow_task_completed_event_attributes
                   .started_event_id)
    return _ms(completed) - _ms(started)


def _turn(events: list[HistoryEvent]) -> Turn:
    turn = Turn(span=_ms(events[-1]) - _ms(events[0]))
    by_id = {e.event_id: e for e in events}
    models: list[tuple[float, float]] = []  # (queue wait, run) of each model request
    summary_done: int | None = None
    for event in events:
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs = event.activity_task_completed_event_attributes
            scheduled, started = by_id.get(attrs.scheduled_event_id), by_id.get(
                attrs.started_event_id)
            if scheduled is None or started is None:
                continue
            name = _kind(scheduled.activity_task_scheduled_event_attributes.activity_type.name)
            wait, run = _ms(started) - _ms(scheduled), _ms(event) - _ms(started)
            if name == MODEL:
                models.append((wait, run))
                summary_done = event.event_id  # the last one is the summary request
                continue
            _add(turn, name, wait, run)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            attrs_ = event.workflow_task_completed_event_attributes
            scheduled, started = by_id.get(attrs_.scheduled_event_id), by_id.get(
                attrs_.started_event_id)
            if scheduled is not None and started is not None:
                # Started → completed is the worker's: the workflow code and the recorder's
                # local activities (event writes) it waits for.
                _add(turn, "workflow task (with the recorder's local activities)",
                     _ms(started) - _ms(scheduled), _ms(event) - _ms(started))
        elif kind == EventType.EVENT_TYPE_MARKER_RECORDED:
            turn.counts["local activities (event writes)"] += 1
    for index, (wait, run) in enumerate(models):
        _add(turn, SUMMARY if index == len(models) - 1 else MODEL, wait, run)
    if summary_done is not None:
        end = next((e for e in events if e.event_id > summary_done
                    and e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), None)
        if end is not None:
            turn.within[END_TASK] = _task_ms(events, end)
    turn.parts["payload conversion (JSON, replayed here)"] = _conversion_ms(events)
    return turn


def _add(turn: Turn, name: str, wait: float, run: float) -> None:
    turn.parts[f"{name}: {QUEUE_WAIT}"] += wait
    turn.parts[f"{name}: {RUNNING}"] += run
    turn.counts[f"{name}: {QUEUE_WAIT}"] += 1
    turn.counts[f"{name}: {RUNNING}"] += 1


def _conversion_ms(events: list[HistoryEvent]) -> float:
    payloads: list[Payload] = []
    for event in events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            payloads += event.activity_task_scheduled_event_attributes.input.payloads
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            payloads += event.activity_task_completed_event_attributes.result.payloads
    converter = DataConverter.default.payload_converter
    began = time.perf_counter()
    converter.to_payloads(converter.from_payloads(payloads))
    return (time.perf_counter() - began) * 1000


async def history_turns(client: Client, workflow_ids: list[str]) -> list[Turn]:
    turns: list[Turn] = []
    for workflow_id in workflow_ids:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        turns += turns_of(list(history.events))
    return turns


# --- the dev server's floor --------------------------------------------------------------------


@workflow.defn(name="BenchFloor")
class Floor:
    """`count` empty activities one after another, regular or local."""

    @workflow.run
    async def run(self, count: int, local: bool) -> None:
        for _ in range(count):
            if local:
                await workflow.execute_local_activity(raw_task, start_to_close_timeout=RAW_TIMEOUT)
            else:
                await workflow.execute_activity(raw_task, start_to_close_timeout=RAW_TIMEOUT)


async def floor_ms(client: Client, repeats: int = 5) -> dict[str, float]:
    """Milliseconds a regular and a local empty activity add to a workflow (median of
    `repeats`: a workflow of FLOOR_ACTIVITIES less an empty one, per activity)."""
    queue = f"bench-floor-{uuid.uuid4().hex[:8]}"

    async def wall(count: int, local: bool) -> float:
        began = time.perf_counter()
        await client.execute_workflow(Floor.run, args=[count, local],
                                      id=f"floor-{uuid.uuid4()}", task_queue=queue,
                                      execution_timeout=timedelta(minutes=5))
        return (time.perf_counter() - began) * 1000

    result = {}
    async with Worker(client, task_queue=queue, workflows=[Floor], activities=[raw_task]):
        await wall(2, False)  # warm up
        for local in (False, True):
            samples = [(await wall(FLOOR_ACTIVITIES, local) - await wall(0, local))
                       / FLOOR_ACTIVITIES for _ in range(repeats)]
            result["local" if local else "regular"] = statistics.median(samples)
    return result


def report(turns: list[Turn], floor: dict[str, float]) -> str:
    names = list(dict.fromkeys(name for t in turns for name in t.parts))
    rows = []
    for name in names:
        per_turn = statistics.median(t.parts.get(name, 0.0) for t in turns)
        count = statistics.median(t.counts.get(name, 0) for t in turns) if any(
            name in t.counts for t in turns) else None
        each = f"{per_turn / count:.1f}" if count else ""
        rows.append([name, f"{per_turn:.1f}", f"{count:g}" if count is not None else "",
                     each])
    accounted = [statistics.median(t.parts.get(n, 0.0) for t in turns) for n in names
                 if not n.startswith("payload")]
    span = statistics.median(t.span for t in turns)
    for name in (MESSAGE_TASK, END_TASK):
        seen = [t.within[name] for t in turns if name in t.within]
        if seen:
            rows.append([name, f"{statistics.median(seen):.1f}", "1", ""])
    rows.append(["the rest (gaps: history writes, polls)", f"{span - sum(accounted):.1f}", "",
                 ""])
    rows.append(["the turn, in history (Update accepted → last event)", f"{span:.1f}", "", ""])
    markers = statistics.median(t.counts.get("local activities (event writes)", 0)
                                for t in turns)
    rows.append(["floor: one empty regular activity (same server, same run)",
                 f"{floor['regular']:.1f}", "", ""])
    rows.append(["floor: one empty local activity", f"{floor['local']:.1f}", "", ""])
    activities = sum(statistics.median(t.counts.get(f"{k}: {RUNNING}", 0) for t in turns)
                     for k in (MODEL, TOOL, SUMMARY))
    floor_turn = activities * floor["regular"] + markers * floor["local"]
    table = markdown_table(["part of a turn (median over turns)", "ms a turn", "count",
                            "ms each"], rows, [False, True, True, True])
    return (f"{table}\n\nthe server's floor for the turn's {activities:g} activities and "
            f"{markers:g} local activities: {floor_turn:.1f} ms of the turn's {span:.1f} ms "
            f"({len(turns)} turns)")

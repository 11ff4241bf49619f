"""How long a Temporal cluster keeps a workflow task waiting after an activity (issue 39).

Between two activities of a run the history service only has to hand the next workflow task
to the worker; its transfer queue does that, and its reader polls at most
`history.transferProcessorMaxPollRPS` times a second on each shard (20 by default). Once the
reader's burst is spent, each such task waits for the next slot: about 50 ms between
`WORKFLOW_TASK_SCHEDULED` and `WORKFLOW_TASK_STARTED`, where an unthrottled server takes a
millisecond or two. `run_chain` runs a chain of empty activities (workflows/engine_probe.py)
on a task queue of its own and reads those two timestamps from its history;
`waystation doctor` (`engine_report`) and bench/bench_engine.py report them.

A second setting holds up short timers: the history service fires a timer due within
`history.timerProcessorMaxTimeShift` (1 s by default) of now only at that shift, so the 1 ms
timer that lets a decision's Update answer before the run's next local steps
(`ANSWER_BREAK`, workflows/gate_handlers.py) fires a second late, and the click's next step
with it. The doctor's chain ends with a few such timers and reports how late they fired.
"""

from __future__ import annotations

import statistics
import uuid
from datetime import timedelta

from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Worker

from waystation.activities.engine_probe import probe_step
from waystation.workflows.engine_probe import EngineProbe, ProbeChain
from waystation.workflows.gate_handlers import ANSWER_BREAK

ANSWER_MS = ANSWER_BREAK / timedelta(milliseconds=1)

# Enough activities in a row to spend a default reader's burst of polls (the first 40 or so
# of a chain were not held up, on a busy machine) and show its steady rate in the second half.
DOCTOR_CHAIN = 100
# Unthrottled, a workflow task waits 1–5 ms after an activity even on a busy laptop;
# throttled at the default 20 polls a second, about 50 ms.
STALL_MS = 20.0
# Short timers after the chain: at the default shift each costs the doctor a second.
DOCTOR_TIMERS = 5
# With a 1 ms shift a 1 ms timer fired 2–7 ms late on the dev server (busy machine included);
# with the default 1 s shift, about 1,000 ms.
TIMER_LATE_MS = 100.0


class ChainTiming(BaseModel):
    activities: int
    # From the first activity's scheduling to the run's completion, per activity.
    ms_per_activity: float
    # Each workflow task that follows a completed activity: scheduled → started.
    waits_ms: list[float]
    # Each short timer: how much later than its duration it fired.
    timers_late_ms: list[float] = []

    @property
    def median_wait_ms(self) -> float:
        return statistics.median(self.waits_ms)

    @property
    def max_wait_ms(self) -> float:
        return max(self.waits_ms)

    @property
    def steady_wait_ms(self) -> float:
        """The median wait over the chain's second half, once any burst is spent."""
        return statistics.median(self.waits_ms[len(self.waits_ms) // 2:])

    @property
    def stalled(self) -> bool:
        return self.steady_wait_ms > STALL_MS

    @property
    def timers_late(self) -> bool:
        return bool(self.timers_late_ms) and statistics.median(self.timers_late_ms) > TIMER_LATE_MS


def chain_timing(history: WorkflowHistory) -> ChainTiming:
    """The figures of a finished probe chain, from its history's timestamps."""
    events = history.events
    ms = [event.event_time.ToNanoseconds() / 1e6 for event in events]
    scheduled = [i for i, e in enumerate(events)
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    # The workflow tasks scheduled by an activity's completion, by event id: when.
    after_activity: dict[int, float] = {}
    waits = []
    for previous, event, at in zip([None, *events], events, ms, strict=False):
        if (event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
                and previous is not None
                and previous.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED):
            after_activity[event.event_id] = at
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            started = event.workflow_task_started_event_attributes
            if started.scheduled_event_id in after_activity:
                waits.append(at - after_activity[started.scheduled_event_id])
    timer_started = {e.event_id: at for e, at in zip(events, ms, strict=True)
                     if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED}
    late = [at - timer_started[e.timer_fired_event_attributes.started_event_id] - ANSWER_MS
            for e, at in zip(events, ms, strict=True)
            if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED]
    # The chain ends with the workflow task that saw its last activity's result.
    last_step = max(i for i, e in enumerate(events)
                    if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
    chain_end = next(i for i, e in enumerate(events) if i > last_step and
                     e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
    return ChainTiming(activities=len(scheduled),
                       ms_per_activity=(ms[chain_end] - ms[scheduled[0]]) / len(scheduled),
                       waits_ms=waits, timers_late_ms=late)


async def run_chain(client: Client, activities: int, timers: int = 0) -> ChainTiming:
    """Run one chain of `activities` empty activities, then `timers` short timers, on a
    worker of its own and time it."""
    name = f"waystation-engine-probe-{uuid.uuid4()}"
    async with Worker(client, task_queue=name, workflows=[EngineProbe],
                      activities=[probe_step]):
        handle = await client.start_workflow(EngineProbe.run, ProbeChain(activities=activities,
                                                                        timers=timers),
                                             id=name, task_queue=name)
        await handle.result()
        return chain_timing(await handle.fetch_history())


def engine_report(chain: ChainTiming, where: str) -> tuple[str, int]:
    """What `waystation doctor` prints of a chain run on `where`, and its exit status."""
    lines = [
        f"engine ({where}): {chain.activities} empty activities in a row, "
        f"{chain.ms_per_activity:.1f} ms each",
        f"a workflow task's wait after an activity: {chain.steady_wait_ms:.1f} ms over the "
        f"chain's second half (median; {chain.median_wait_ms:.1f} over all, max "
        f"{chain.max_wait_ms:.1f})",
    ]
    if chain.timers_late_ms:
        lines.append(
            f"a {ANSWER_MS:g} ms timer (a decision's answer break) fired "
            f"{statistics.median(chain.timers_late_ms):.1f} ms late (median of "
            f"{len(chain.timers_late_ms)}; max {max(chain.timers_late_ms):.1f})")
    if not chain.stalled and not chain.timers_late:
        ok = "ok: the history service does not hold workflow tasks or short timers up"
        return "\n".join([*lines, ok]), 0
    if chain.stalled:
        lines.append(
            f"stalled: above {STALL_MS:.0f} ms, the history service's transfer queue is "
            "throttled (history.transferProcessorMaxPollRPS, per shard): see "
            "docs/operations.md, \"The engine's throttle\"")
    if chain.timers_late:
        lines.append(
            f"late timers: above {TIMER_LATE_MS:.0f} ms, short timers wait for "
            "history.timerProcessorMaxTimeShift, and a click's next step waits with them: "
            "see docs/operations.md, \"The engine's throttle\"")
    return "\n".join(lines), 1

"""Baseline workflows and small helpers shared by the benchmarks.

The raw workflows live here, not in the benchmark script: the workflow sandbox re-imports a
workflow's module, so that module must be importable by name and light (stdlib + temporalio).
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
import time
from collections.abc import Coroutine, Sequence
from datetime import timedelta

from temporalio import activity, workflow

RAW_TIMEOUT = timedelta(seconds=30)

# When each raw workflow's first activity started (perf_counter), by workflow id. Activities
# run on the benchmark's own event loop, so a plain dict and futures are enough.
STARTED: dict[str, float] = {}
_WAITERS: dict[str, asyncio.Future[float]] = {}


@activity.defn(name="bench_raw_task")
async def raw_task() -> None:
    """A no-op task that writes nothing; it only notes when a workflow's first one started."""
    now = time.perf_counter()
    workflow_id = activity.info().workflow_id
    if workflow_id is not None and workflow_id not in STARTED:
        STARTED[workflow_id] = now
        waiter = _WAITERS.pop(workflow_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(now)


def expect_start(workflow_id: str) -> asyncio.Future[float]:
    """A future resolved with the perf_counter at which `workflow_id`'s first task started."""
    future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    if workflow_id in STARTED:
        future.set_result(STARTED[workflow_id])
    else:
        _WAITERS[workflow_id] = future
    return future


@workflow.defn(name="BenchRawGate")
class RawGate:
    """Wait for a flag set by an Update, then run one no-op activity."""

    def __init__(self) -> None:
        self._waiting = False
        self._go = False

    @workflow.run
    async def run(self) -> None:
        self._waiting = True
        await workflow.wait_condition(lambda: self._go)
        await workflow.execute_activity(raw_task, start_to_close_timeout=RAW_TIMEOUT)

    @workflow.update
    def decide(self, decision: str) -> str:
        self._go = True
        return decision

    @workflow.query
    def waiting(self) -> bool:
        return self._waiting


@workflow.defn(name="BenchRawShape")
class RawShape:
    """Phases of sequential no-op activities, shaped like a validation run."""

    @workflow.run
    async def run(self, shape: list[int]) -> int:
        done = 0
        for tasks in shape:
            for _ in range(tasks):
                await workflow.execute_activity(raw_task, start_to_close_timeout=RAW_TIMEOUT)
                done += 1
        return done


def run_and_exit(main: Coroutine[object, object, None]) -> None:
    """Run a benchmark's `main` and leave the process without finalizing the interpreter.
    A Temporal client's Rust runtime threads can outlive the event loop and abort the
    interpreter's finalization ("PyGILState_Release: thread state ... must be current",
    temporalio/sdk-python#300): once every figure is printed there is nothing left to tear
    down, so the process exits at once, with the status the figures were printed under."""
    asyncio.run(main)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def percentile(samples: Sequence[float], pct: float) -> float:
    """The pct-th percentile, interpolated linearly between closest ranks."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = (len(ordered) - 1) * pct / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_summary(seconds: Sequence[float], decimals: int = 2) -> str:
    """`p50 … ms, p99 … ms` of durations measured in seconds."""
    p50, p99 = (percentile(seconds, pct) * 1000 for pct in (50, 99))
    return f"p50 {p50:{decimals + 5}.{decimals}f} ms, p99 {p99:{decimals + 5}.{decimals}f} ms"


def ratio(waystation: float, raw: float) -> str:
    return f"{waystation / raw:.2f}×" if raw else "n/a"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]],
                   right: Sequence[bool]) -> str:
    """A markdown table with padded columns (readable raw and rendered)."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        padded = [str(c).rjust(w) if r else str(c).ljust(w)
                  for c, w, r in zip(cells, widths, right, strict=True)]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if r else ("-" * (w + 2))
                          for w, r in zip(widths, right, strict=True)) + "|"
    return "\n".join([line(header), rule, *(line(row) for row in rows)])

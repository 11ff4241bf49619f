"""The raw ceiling for batch jobs: N no-op activities, W at a time, continuing as new per round.

Kept apart from the benchmark script because the workflow sandbox re-imports this module: it
must stay light (stdlib + temporalio).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from temporalio import workflow

from bench.common import RAW_TIMEOUT, raw_task


@dataclass
class RawBatchInput:
    items: int
    workers: int
    round_size: int
    done: int = 0


@workflow.defn(name="BenchRawBatch")
class RawBatch:
    def __init__(self) -> None:
        self._in_flight = 0

    async def _one(self) -> None:
        try:
            await workflow.execute_activity(raw_task, start_to_close_timeout=RAW_TIMEOUT)
        finally:
            self._in_flight -= 1

    @workflow.run
    async def run(self, arg: RawBatchInput) -> int:
        end = min(arg.items, arg.done + arg.round_size)
        tasks = []
        for _ in range(arg.done, end):
            await workflow.wait_condition(lambda: self._in_flight < arg.workers)
            self._in_flight += 1
            tasks.append(asyncio.create_task(self._one()))
        await asyncio.gather(*tasks)
        if end < arg.items:
            workflow.continue_as_new(RawBatchInput(arg.items, arg.workers, arg.round_size, end))
        return end

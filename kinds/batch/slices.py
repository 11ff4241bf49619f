"""A batch job's items through the pipeline: slices, retries and failures, at most
`max_workers` at once (seeds 002, 004).

A part of `BatchJob` (kinds/batch/host.py). Items run in *slices* of consecutive ordinals,
one activity each, sequential inside. A slice reports the items that failed; each is retried
alone (`run_batch_item`, with backoff, `max_retries`), and an item that still fails is marked
failed while the job goes on, until failed items exceed `failure_threshold`. A round runs up to
`round_size` ordinals and stops starting work near the history budget; what is left is queued
in `BatchProgress` for the job's continuation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from waystation.kinds.batch.activities.items import (
        ITEM_FAILED,
        SLICE_BUDGET_SECONDS,
        TEMPLATE_ERROR,
        BatchActivities,
        ItemInput,
        SliceInput,
        SliceResult,
    )
    from waystation.kinds.batch.budget import Budget
    from waystation.kinds.batch.host import BatchHost
    from waystation.kinds.batch.models import ItemRange, ItemRetry
    from waystation.sdk import EventWrite

ITEM_TIMEOUT = timedelta(minutes=10)
# A slice starts no item after its budget, so it lasts at most that plus one item.
SLICE_TIMEOUT = ITEM_TIMEOUT + timedelta(seconds=SLICE_BUDGET_SECONDS)
# Items and slices heartbeat while they run: one whose worker died is retried after this.
ITEM_HEARTBEAT_TIMEOUT = timedelta(seconds=10)
# A slice fails only when its worker or the database does (item failures are reported, not
# raised). After these tries its items run one by one, each with the item retry policy.
SLICE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3,
                          non_retryable_error_types=[ITEM_FAILED])
# Slices: about this many per worker and round (a short tail when a round ends), at most
# MAX_SLICE_ITEMS items each (a paused job stops within one slice).
SLICES_PER_WORKER = 4
MAX_SLICE_ITEMS = 50
# run_events stays bounded however many items: about this many progress events per job,
# and item.failed events for the first few failures only (the rest are in the counts).
PROGRESS_EVENTS = 20
FAILURE_EVENTS = 20


def slice_size(items: int, workers: int) -> int:
    """Items per slice for a round of `items`: several slices per worker, none too long."""
    return max(1, min(MAX_SLICE_ITEMS, -(-items // (workers * SLICES_PER_WORKER))))


class Slices:
    """The job's items at work: what runs next, how it runs, what it reports."""

    def __init__(self, host: BatchHost, budget: Budget) -> None:
        self._host, self._budget = host, budget
        self.in_flight = 0
        # Slices and item retries in flight (held so they are not garbage collected).
        self._tasks: set[asyncio.Task[None]] = set()

    async def round(self) -> None:
        """Run up to round_size items in slices, at most max_workers activities at a time;
        none starts while the job is paused, or before the budget allows it."""
        host = self._host
        p, workers = host.counts, host.spec.max_workers
        end = min(p.total, p.next_ordinal + host.arg.round_size)
        size = slice_size(end - p.next_ordinal, workers)
        host.show(f"items {p.next_ordinal}–{end} of {p.total}")

        def has_work() -> bool:
            # Past the budget the run starts nothing new and continues as new (the hard limit
            # is far above: each activity in flight adds about six events before the run ends).
            return (workflow.info().get_current_history_length() < host.arg.history_budget
                    and bool(p.retries or p.ranges or p.next_ordinal < end))

        while host.stop is None:
            await workflow.wait_condition(
                lambda: host.stop is not None
                or (self.in_flight == 0 and not has_work())
                or (has_work() and not p.paused and self.in_flight < workers))
            if host.stop is not None or not has_work():
                break
            if self._budget.over(1 if p.retries else size):
                await self._budget.ask(size)
                continue
            self._launch(self._next_work(end, size))
        await workflow.wait_condition(lambda: self.in_flight == 0)

    async def alone(self, ordinal: int) -> str | None:
        """Run one item alone now (the test item); None when it completed, else its error."""
        self.in_flight += 1
        try:
            error = await self._item(ordinal)
        finally:
            self.in_flight -= 1
        self._report_progress()
        return error

    def _next_work(self, end: int, size: int) -> Coroutine[Any, Any, None]:
        """Retries first (their items are the oldest), then slices' leftovers, then new items."""
        p = self._host.counts
        if p.retries:
            return self._retry(p.retries.pop(0))
        if p.ranges:
            return self._slice(p.ranges.pop(0))
        batch = ItemRange(first=p.next_ordinal, count=min(size, end - p.next_ordinal))
        p.next_ordinal += batch.count
        return self._slice(batch)

    def _launch(self, work: Coroutine[Any, Any, None]) -> None:
        # Counted here, not inside the task: the loop checks the count before the task runs.
        self.in_flight += 1

        async def counted() -> None:
            try:
                await work
            finally:
                self.in_flight -= 1
                self._report_progress()
        self._tasks.add(task := asyncio.create_task(counted()))
        task.add_done_callback(self._tasks.discard)

    async def _slice(self, batch: ItemRange) -> None:
        host = self._host
        p, spec = host.counts, host.spec
        try:
            result: SliceResult = await workflow.execute_activity_method(
                BatchActivities.run_slice,
                SliceInput(job_id=host.arg.run_id, first_ordinal=batch.first,
                           count=batch.count, max_retries=spec.max_retries,
                           prelude=host.prelude(), report_spend=self._budget.counted),
                start_to_close_timeout=SLICE_TIMEOUT, heartbeat_timeout=ITEM_HEARTBEAT_TIMEOUT,
                retry_policy=SLICE_RETRY,
                summary=f"items {batch.first}–{batch.first + batch.count - 1}")
        except ActivityError:
            # Not an item's failure (those are reported): run each of its items alone.
            p.retries.extend(ItemRetry(ordinal=o)
                             for o in range(batch.first, batch.first + batch.count))
            return
        p.completed += result.completed
        self._budget.spent(result.job_cost_usd)
        rest = batch.first + batch.count - result.next_ordinal
        if rest > 0:  # the slice ran out of time: its remaining items go first
            p.ranges.insert(0, ItemRange(first=result.next_ordinal, count=rest))
        for failure in result.failures:
            if failure.final:
                self._item_failed(failure.ordinal, failure.error)
            else:
                p.retries.append(ItemRetry(ordinal=failure.ordinal, first_attempt=2,
                                           delay_seconds=spec.retry_initial_seconds))

    async def _retry(self, retry: ItemRetry) -> None:
        if retry.delay_seconds > 0:
            await workflow.sleep(timedelta(seconds=retry.delay_seconds))
        await self._item(retry.ordinal, first_attempt=retry.first_attempt)

    async def _item(self, ordinal: int, *, first_attempt: int = 1) -> str | None:
        """Run one item alone; returns None when it completed, else its error."""
        host = self._host
        p, spec = host.counts, host.spec
        try:
            done = await workflow.execute_activity_method(
                BatchActivities.run_item,
                ItemInput(job_id=host.arg.run_id, ordinal=ordinal,
                          max_retries=spec.max_retries, prelude=host.prelude(),
                          first_attempt=first_attempt, report_spend=self._budget.counted),
                start_to_close_timeout=ITEM_TIMEOUT, heartbeat_timeout=ITEM_HEARTBEAT_TIMEOUT,
                retry_policy=RetryPolicy(
                    # Attempt n waits retry_initial * 2^(n-2), wherever attempt 1 ran.
                    initial_interval=timedelta(
                        seconds=spec.retry_initial_seconds * 2 ** (first_attempt - 1)),
                    backoff_coefficient=2.0,
                    maximum_attempts=max(1, spec.max_retries + 2 - first_attempt),
                    non_retryable_error_types=[TEMPLATE_ERROR, ITEM_FAILED]),
                summary=f"item {ordinal}")
            p.completed += 1
            self._budget.spent(done.job_cost_usd)
            return None
        except ActivityError as failure:
            error = getattr(failure.cause, "message", None) or str(failure)
            self._item_failed(ordinal, error)
            return error

    def _item_failed(self, ordinal: int, error: str) -> None:
        host = self._host
        p = host.counts
        p.failed += 1
        if p.failures_reported < FAILURE_EVENTS:
            p.failures_reported += 1
            host.stage(events=[host.event(
                f"item.{ordinal}.failed", "item.failed", status="failed", error_message=error,
                output={"ordinal": ordinal, "failed": p.failed})])
        if p.failed > host.spec.failure_threshold * p.total and host.stop is None:
            host.stop = ("failure_threshold",
                         f"{p.failed} of {p.total} items failed, more than the failure "
                         f"threshold of {host.spec.failure_threshold:.0%}")

    def _report_progress(self) -> None:
        p = self._host.counts
        every = max(1, p.total // PROGRESS_EVENTS)
        bucket = (p.completed + p.failed) // every
        if bucket > p.progress_reported:
            p.progress_reported = bucket
            # Staged: it rides on the next item activity rather than costing a write of its own.
            self._host.stage(events=[self.progress_event(f"job.progress.{bucket}")])

    def progress_event(self, key: str) -> EventWrite:
        """A `job.progress` event: the counts as they stand."""
        host = self._host
        p = host.counts
        return host.event(
            key, "job.progress", status=host.life.status, progress_pct=host.progress_pct(),
            output={"total": p.total, "completed": p.completed, "failed": p.failed})

"""BatchJob: many items through a pipeline of steps, with bounded concurrency (seeds 002, 004).

Items, their outputs and their state live in Postgres; the workflow only counts. Items run in
*slices* of consecutive ordinals, one activity each, sequential inside, so at most
`max_workers` items run at once. A slice reports the items that failed; each is retried
alone (`run_batch_item`, with backoff, `max_retries`), and an item that still fails is marked
failed while the job goes on, until failed items exceed `failure_threshold`. The workflow runs
rounds of `round_size` ordinals and continues as new between them (or earlier, when its
history reaches `history_budget`, 7,000 events), so its history stays under 10,000 events
whatever the item count.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from waystation.kinds.batch.activities.items import (
        ITEM_FAILED,
        SLICE_BUDGET_SECONDS,
        TEMPLATE_ERROR,
        BatchActivities,
        ItemInput,
        PrepareJobInput,
        SliceInput,
        SliceResult,
    )
    from waystation.kinds.batch.models import (
        BatchProgress,
        BatchRunInput,
        BatchRunResult,
        ItemRange,
        ItemRetry,
        PauseInput,
        PauseResult,
    )
    from waystation.sdk import (
        DecisionInput,
        EventWrite,
        GateOption,
        GateSpec,
        RunStatus,
        RunWorkflow,
    )
    from waystation.sdk.gates import (
        RAISE_BUDGET,
        STOP_BUDGET,
        budget_gate_spec,
        feedback_number,
        stopped_message,
    )
    from waystation.sdk.workflow import JOB_NOT_RUNNING

PREPARE_TIMEOUT = timedelta(minutes=30)
PREPARE_HEARTBEAT_TIMEOUT = timedelta(minutes=2)
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
TEST_GATE = "test_unit_failed"


def slice_size(items: int, workers: int) -> int:
    """Items per slice for a round of `items`: several slices per worker, none too long."""
    return max(1, min(MAX_SLICE_ITEMS, -(-items // (workers * SLICES_PER_WORKER))))


@workflow.defn(name="BatchJob", sandboxed=False)  # see waystation/sandboxing.py
class BatchJob(RunWorkflow):
    @workflow.init
    def __init__(self, arg: BatchRunInput) -> None:
        self._arg = arg
        self._spec = arg.spec
        self._p = arg.progress or BatchProgress(max_cost_usd=arg.spec.max_cost_usd)
        self.init_run(arg.run_id, snapshots_taken=self._p.snapshots_taken,
                      status="paused" if self._p.paused else "running")
        self._in_flight = 0
        # Why the job must stop early: (stop reason, message).
        self._stop: tuple[str, str] | None = None
        self._lock = asyncio.Lock()
        self._decided = arg.decided
        # Slices and item retries in flight (held so they are not garbage collected).
        self._tasks: set[asyncio.Task[None]] = set()

    # --- the job ---------------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: BatchRunInput) -> BatchRunResult:
        return await self.lifecycle(self._job)

    async def _job(self) -> BatchRunResult:
        p = self._p
        if self._arg.progress is None:
            await self._prepare()
        if self._spec.test_first and not p.test_done and p.total > 0:
            await self._test_item()
        await self._round()
        if self._stop is not None:
            reason, message = self._stop
            await self.fail(message, stop_reason=reason, result=self._result("failed"))
        if p.next_ordinal < p.total or p.ranges or p.retries:
            await self._continue_as_new()
        return await self._complete()

    async def _prepare(self) -> None:
        self.show("storing items")
        if self._arg.forked_from is None:
            self.stage_start(name=self._spec.name)
        else:
            self.stage_start(name=self._spec.name, forked_from=self._arg.forked_from)
        await self.record()
        prepared = await workflow.execute_activity_method(
            BatchActivities.prepare_job, PrepareJobInput(run_id=self._arg.run_id,
                                                         spec=self._spec),
            start_to_close_timeout=PREPARE_TIMEOUT, heartbeat_timeout=PREPARE_HEARTBEAT_TIMEOUT,
            retry_policy=RetryPolicy(maximum_attempts=5), summary="store items")
        self._p.total = prepared.total
        self.stage(events=[self.event(
            "job.prepared", "job.prepared", status="running", progress_pct=0,
            output={"total": prepared.total})])

    async def _test_item(self) -> None:
        """Run item 0 alone; if it fails, a human decides whether the rest should run."""
        p = self._p
        p.next_ordinal = 1
        self.show("test item")
        self._in_flight += 1
        try:
            error = await self._item(0)
        finally:
            self._in_flight -= 1
        self._report_progress()
        p.test_done = True
        if error is None:
            return
        outcome = await self.ask_human(lambda: self._test_gate(error), where="test item",
                                       decided=self._take_decided(TEST_GATE))
        if outcome.decision is None or outcome.decision.decision == "abort":
            await self.fail(f"aborted after the test item failed: {error}",
                            stop_reason="aborted_after_test_item", result=self._result("failed"))

    def _test_gate(self, error: str) -> GateSpec:
        return GateSpec(
            checkpoint_name=TEST_GATE, phase=0, title=f"Test item of {self._spec.name} failed",
            description=f"Item 0 failed: {error}. Run the other {self._p.total - 1} items "
                        "anyway, or abort the job?",
            context={"item_ordinal": 0, "error": error, "total": self._p.total},
            options=[GateOption(value="proceed", label="Proceed with all items"),
                     GateOption(value="abort", label="Abort the job")],
            recommended_option="abort", rejecting_options=["abort"],
            expires_in=timedelta(seconds=self._spec.gate_timeout_seconds),
            expiry_policy="pause")

    async def _round(self) -> None:
        """Run up to round_size items in slices, at most max_workers activities at a time."""
        p, workers = self._p, self._spec.max_workers
        end = min(p.total, p.next_ordinal + self._arg.round_size)
        size = slice_size(end - p.next_ordinal, workers)
        self.show(f"items {p.next_ordinal}–{end} of {p.total}")

        def has_work() -> bool:
            # Past the budget the run starts nothing new and continues as new (the hard limit
            # is far above: each activity in flight adds about six events before the run ends).
            return (workflow.info().get_current_history_length() < self._arg.history_budget
                    and bool(p.retries or p.ranges or p.next_ordinal < end))

        while self._stop is None:
            await workflow.wait_condition(
                lambda: self._stop is not None
                or (self._in_flight == 0 and not has_work())
                or (has_work() and not p.paused and self._in_flight < workers))
            if self._stop is not None or not has_work():
                break
            if self._over_budget(1 if p.retries else size):
                await self._ask_budget(size)
                continue
            self._launch(self._next_work(end, size))
        await workflow.wait_condition(lambda: self._in_flight == 0)

    def _next_work(self, end: int, size: int) -> Coroutine[Any, Any, None]:
        """Retries first (their items are the oldest), then slices' leftovers, then new items."""
        p = self._p
        if p.retries:
            return self._retry(p.retries.pop(0))
        if p.ranges:
            return self._slice(p.ranges.pop(0))
        batch = ItemRange(first=p.next_ordinal, count=min(size, end - p.next_ordinal))
        p.next_ordinal += batch.count
        return self._slice(batch)

    def _launch(self, work: Coroutine[Any, Any, None]) -> None:
        # Counted here, not inside the task: the loop checks the count before the task runs.
        self._in_flight += 1

        async def counted() -> None:
            try:
                await work
            finally:
                self._in_flight -= 1
                self._report_progress()
        self._tasks.add(task := asyncio.create_task(counted()))
        task.add_done_callback(self._tasks.discard)

    async def _slice(self, batch: ItemRange) -> None:
        p, spec = self._p, self._spec
        try:
            result: SliceResult = await workflow.execute_activity_method(
                BatchActivities.run_slice,
                SliceInput(job_id=self._arg.run_id, first_ordinal=batch.first,
                           count=batch.count, max_retries=spec.max_retries,
                           prelude=self._recorder.take_staged(),
                           report_spend=p.max_cost_usd is not None),
                start_to_close_timeout=SLICE_TIMEOUT, heartbeat_timeout=ITEM_HEARTBEAT_TIMEOUT,
                retry_policy=SLICE_RETRY,
                summary=f"items {batch.first}–{batch.first + batch.count - 1}")
        except ActivityError:
            # Not an item's failure (those are reported): run each of its items alone.
            p.retries.extend(ItemRetry(ordinal=o)
                             for o in range(batch.first, batch.first + batch.count))
            return
        p.completed += result.completed
        self._spent(result.job_cost_usd)
        rest = batch.first + batch.count - result.next_ordinal
        if rest > 0:  # the slice ran out of time: its remaining items go first
            p.ranges.insert(0, ItemRange(first=result.next_ordinal, count=rest))
        for failure in result.failures:
            if failure.final:
                self._item_failed(failure.ordinal, failure.error)
            else:
                p.retries.append(ItemRetry(ordinal=failure.ordinal, first_attempt=2,
                                           delay_seconds=spec.retry_initial_seconds))

    # --- the budget ----------------------------------------------------------------------------

    def _spent(self, job_cost_usd: float | None) -> None:
        # Slices finish in any order: the largest total reported is the latest.
        if job_cost_usd is not None:
            self._p.cost_usd = max(self._p.cost_usd, job_cost_usd)

    def _next_cost(self, items: int) -> float:
        """What `items` more items may cost, at the average so far."""
        p = self._p
        done = p.completed + p.failed
        return p.cost_usd / done * items if done else 0.0

    def _over_budget(self, items: int) -> bool:
        p = self._p
        return p.max_cost_usd is not None and p.cost_usd + self._next_cost(items) > p.max_cost_usd

    async def _ask_budget(self, items: int) -> None:
        p, spec = self._p, self._spec
        budget = p.max_cost_usd
        assert budget is not None
        outcome = await self.ask_human(
            lambda: budget_gate_spec(
                phase=0, spent=p.cost_usd, next_call=self._next_cost(items), budget=budget,
                expires_in=timedelta(seconds=spec.gate_timeout_seconds), expiry_policy="pause"),
            where="budget", decided=self._take_decided(RAISE_BUDGET))
        d = outcome.decision
        if d is not None and d.decision == "raise":
            p.max_cost_usd = feedback_number(d.feedback)
        elif self._stop is None:
            self._stop = (STOP_BUDGET, stopped_message(budget, p.cost_usd))

    def _take_decided(self, checkpoint: str) -> DecisionInput | None:
        """A fork's decision, once, for the first gate of its checkpoint."""
        decided = self._decided
        if decided is None or decided.checkpoint_name != checkpoint:
            return None
        self._decided = None
        return decided

    async def _retry(self, retry: ItemRetry) -> None:
        if retry.delay_seconds > 0:
            await workflow.sleep(timedelta(seconds=retry.delay_seconds))
        await self._item(retry.ordinal, first_attempt=retry.first_attempt)

    async def _item(self, ordinal: int, *, first_attempt: int = 1) -> str | None:
        """Run one item alone; returns None when it completed, else its error."""
        p, spec = self._p, self._spec
        try:
            done = await workflow.execute_activity_method(
                BatchActivities.run_item,
                ItemInput(job_id=self._arg.run_id, ordinal=ordinal,
                          max_retries=spec.max_retries, prelude=self._recorder.take_staged(),
                          first_attempt=first_attempt,
                          report_spend=p.max_cost_usd is not None),
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
            self._spent(done.job_cost_usd)
            return None
        except ActivityError as failure:
            error = getattr(failure.cause, "message", None) or str(failure)
            self._item_failed(ordinal, error)
            return error

    def _item_failed(self, ordinal: int, error: str) -> None:
        p = self._p
        p.failed += 1
        if p.failures_reported < FAILURE_EVENTS:
            p.failures_reported += 1
            self.stage(events=[self.event(
                f"item.{ordinal}.failed", "item.failed", status="failed", error_message=error,
                output={"ordinal": ordinal, "failed": p.failed})])
        if p.failed > self._spec.failure_threshold * p.total and self._stop is None:
            self._stop = ("failure_threshold",
                          f"{p.failed} of {p.total} items failed, more than the failure "
                          f"threshold of {self._spec.failure_threshold:.0%}")

    def _report_progress(self) -> None:
        p = self._p
        every = max(1, p.total // PROGRESS_EVENTS)
        bucket = (p.completed + p.failed) // every
        if bucket > p.progress_reported:
            p.progress_reported = bucket
            # Staged: it rides on the next item activity rather than costing a write of its own.
            self.stage(events=[self._progress_event(f"job.progress.{bucket}")])

    def _progress_event(self, key: str) -> EventWrite:
        p = self._p
        return self.event(
            key, "job.progress", status=self._life.status, progress_pct=self.progress_pct(),
            output={"total": p.total, "completed": p.completed, "failed": p.failed})

    async def _continue_as_new(self) -> None:
        p = self._p
        p.rounds += 1
        self.stage(events=[self._progress_event(f"job.round.{p.rounds}")], with_state=True)
        await self.continue_as_new(lambda snapshots: self._arg.model_copy(
            update={"progress": p.model_copy(update={"snapshots_taken": snapshots}),
                    "decided": self._decided}))

    # --- pause and resume --------------------------------------------------------------------

    @workflow.update
    async def pause(self, request: PauseInput) -> PauseResult:
        """Stop starting items; those in flight finish. The job waits, costing nothing."""
        async with self._lock:
            self._p.paused, self._life.status = True, "paused"
            self._p.pauses += 1
            await self.record(
                events=[self.event(f"job.paused.{self._p.pauses}", "job.paused",
                                   status="paused", progress_pct=self.progress_pct(),
                                   output={"by": request.requested_by})],
                with_state=True)
            self.show(f"paused by {request.requested_by}")
        return PauseResult(status="paused", in_flight=self._in_flight)

    @pause.validator
    def _validate_pause(self, request: PauseInput) -> None:
        if self._p.paused:
            raise ApplicationError("the job is already paused", type=JOB_NOT_RUNNING)
        if self._life.waiting_on is not None:
            raise ApplicationError(f"the job waits for decision {self._life.waiting_on}",
                                   type=JOB_NOT_RUNNING)

    @workflow.update
    async def resume(self, request: PauseInput) -> PauseResult:
        async with self._lock:
            self._p.paused, self._life.status = False, "running"
            await self.record(
                events=[self.event(f"job.resumed.{self._p.pauses}", "job.resumed",
                                   status="running", progress_pct=self.progress_pct(),
                                   output={"by": request.requested_by})],
                with_state=True)
            self.show(f"resumed by {request.requested_by}")
        return PauseResult(status="running", in_flight=self._in_flight)

    @resume.validator
    def _validate_resume(self, request: PauseInput) -> None:
        if not self._p.paused:
            raise ApplicationError("the job is not paused", type=JOB_NOT_RUNNING)

    @workflow.query
    def progress(self) -> BatchProgress:
        return self._p

    # --- ending and the base's hooks ---------------------------------------------------------

    def _result(self, status: str) -> BatchRunResult:
        p = self._p
        return BatchRunResult(run_id=self._arg.run_id, status=status, total=p.total,
                              completed=p.completed, failed=p.failed)

    async def _complete(self) -> BatchRunResult:
        result = self._result("completed")
        p = self._p
        await self.complete(result, details=f"completed · {p.completed} done, {p.failed} failed",
                            total=p.total, completed=p.completed, failed=p.failed)
        return result

    def _set_gate_state(self, waiting_on: str | None, status: RunStatus) -> None:
        # A decision taken while the job is paused leaves it paused.
        super()._set_gate_state(
            waiting_on, "paused" if self._p.paused and status == "running" else status)

    def position(self) -> tuple[int, str | None]:
        return 0, f"items {self._p.completed + self._p.failed}/{self._p.total}"

    def kind_state(self) -> dict[str, Any]:
        return {"progress": self._p.model_dump(mode="json"),
                "spec": {"name": self._spec.name, "steps": [s.name for s in self._spec.steps]}}

    def progress_pct(self) -> int:
        p = self._p
        return 100 * (p.completed + p.failed) // p.total if p.total else 0

    def show(self, details: str) -> None:
        super().show(f"{self._spec.name} · {details}")

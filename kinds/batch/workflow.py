"""BatchJob: many items through a pipeline of steps, with bounded concurrency (seeds 002, 004).

Items, their outputs and their state live in Postgres; the workflow only counts. It stores the
items, runs a test item first when asked to, then runs rounds of `round_size` ordinals and
continues as new between them (or earlier, when its history reaches `history_budget`, 7,000
events), so its history stays under 10,000 events whatever the item count. It composes three
parts, each with one job (kinds/batch/host.py says what they ask of the job):

- `Slices` (slices.py): the items through the pipeline, in slices of consecutive ordinals at
  most `max_workers` at once, retries and failures, progress events;
- `Budget` (budget.py): the job's spend against its budget, and the gate that raises it;
- `FirstItem` (trial.py): the test item and the gate its failure opens.

The workflow keeps the job's life, its counts (`BatchProgress`), why it must stop early, a
fork's decision, pausing, and its Temporal surface: the `pause` and `resume` Updates, the
`progress` query, and the gate Updates and Signal of every run (`waystation.sdk.RunWorkflow`).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from waystation.kinds.batch.activities.items import BatchActivities, PrepareJobInput
    from waystation.kinds.batch.activities.spec import BatchJobSpec
    from waystation.kinds.batch.budget import Budget
    from waystation.kinds.batch.models import (
        BatchProgress,
        BatchRunInput,
        BatchRunResult,
        PauseInput,
        PauseResult,
    )
    from waystation.kinds.batch.slices import Slices
    from waystation.kinds.batch.trial import FirstItem
    from waystation.sdk import DecisionInput, RunStatus, RunWorkflow
    from waystation.sdk.workflow import JOB_NOT_RUNNING
    from waystation.sdk.writes import ReadModelWrite

PREPARE_TIMEOUT = timedelta(minutes=30)
PREPARE_HEARTBEAT_TIMEOUT = timedelta(minutes=2)


@workflow.defn(name="BatchJob", sandboxed=False)  # see waystation/sandboxing.py
class BatchJob(RunWorkflow):
    @workflow.init
    def __init__(self, arg: BatchRunInput) -> None:
        self._arg = arg
        self._p = arg.progress or BatchProgress(max_cost_usd=arg.spec.max_cost_usd)
        self.init_run(arg.run_id, snapshots_taken=self._p.snapshots_taken,
                      status="paused" if self._p.paused else "running")
        self.stop: tuple[str, str] | None = None
        self._lock = asyncio.Lock()
        self._decided = arg.decided
        self._budget = Budget(self)
        self._slices = Slices(self, self._budget)
        self._first_item = FirstItem(self, self._slices)

    @property
    def arg(self) -> BatchRunInput:
        return self._arg

    @property
    def spec(self) -> BatchJobSpec:
        return self._arg.spec

    @property
    def counts(self) -> BatchProgress:
        return self._p

    # --- the job ---------------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: BatchRunInput) -> BatchRunResult:
        return await self.lifecycle(self._job)

    async def _job(self) -> BatchRunResult:
        p = self._p
        if self._arg.progress is None:
            await self._prepare()
        if self.spec.test_first and not p.test_done and p.total > 0:
            await self._first_item.run()
        await self._slices.round()
        if self.stop is not None:
            reason, message = self.stop
            await self.fail(message, stop_reason=reason, result=self.result("failed"))
        if p.next_ordinal < p.total or p.ranges or p.retries:
            await self._continue_as_new()
        return await self._complete()

    async def _prepare(self) -> None:
        self.show("storing items")
        if self._arg.forked_from is None:
            self.stage_start(name=self.spec.name)
        else:
            self.stage_start(name=self.spec.name, forked_from=self._arg.forked_from)
        await self.record()
        prepared = await workflow.execute_activity_method(
            BatchActivities.prepare_job, PrepareJobInput(run_id=self._arg.run_id,
                                                         spec=self.spec),
            start_to_close_timeout=PREPARE_TIMEOUT, heartbeat_timeout=PREPARE_HEARTBEAT_TIMEOUT,
            retry_policy=RetryPolicy(maximum_attempts=5), summary="store items")
        self._p.total = prepared.total
        self.stage(events=[self.event(
            "job.prepared", "job.prepared", status="running", progress_pct=0,
            output={"total": prepared.total})])

    def prelude(self) -> ReadModelWrite | None:
        """What is staged, to ride on the next item activity's first write."""
        return self._recorder.take_staged()

    def take_decided(self, checkpoint: str) -> DecisionInput | None:
        """A fork's decision, once, for the first gate of its checkpoint."""
        decided = self._decided
        if decided is None or decided.checkpoint_name != checkpoint:
            return None
        self._decided = None
        return decided

    async def _continue_as_new(self) -> None:
        p = self._p
        p.rounds += 1
        self.stage(events=[self._slices.progress_event(f"job.round.{p.rounds}")],
                   with_state=True)
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
        return PauseResult(status="paused", in_flight=self._slices.in_flight)

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
        return PauseResult(status="running", in_flight=self._slices.in_flight)

    @resume.validator
    def _validate_resume(self, request: PauseInput) -> None:
        if not self._p.paused:
            raise ApplicationError("the job is not paused", type=JOB_NOT_RUNNING)

    @workflow.query
    def progress(self) -> BatchProgress:
        return self._p

    # --- ending and the base's hooks ---------------------------------------------------------

    def result(self, status: str) -> BatchRunResult:
        p = self._p
        return BatchRunResult(run_id=self._arg.run_id, status=status, total=p.total,
                              completed=p.completed, failed=p.failed)

    async def _complete(self) -> BatchRunResult:
        result = self.result("completed")
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
                "spec": {"name": self.spec.name, "steps": [s.name for s in self.spec.steps]}}

    def progress_pct(self) -> int:
        p = self._p
        return 100 * (p.completed + p.failed) // p.total if p.total else 0

    def show(self, details: str) -> None:
        super().show(f"{self.spec.name} · {details}")

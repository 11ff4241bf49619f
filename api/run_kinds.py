"""How each run kind starts its workflow: the one table a new kind joins.

A kind names its workflow-id prefix and a `start` coroutine that starts the workflow from the
`runs` row the API has just written (the row's `input` is the validated request input).
Every kind's workflow inherits `workflows.gated.GatedWorkflow`, so decisions, re-opening and
cancelling work the same way for all of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
)

from persistence.models import RunRow
from workflows import search_attributes as sa
from workflows.batch import WORKFLOW_ID_PREFIX as BATCH_PREFIX
from workflows.batch import BatchJob
from workflows.batch_models import BatchInput, BatchRunInput
from workflows.mobile import WORKFLOW_ID_PREFIX as MOBILE_PREFIX
from workflows.mobile import WORKFLOW_TASK_TIMEOUT as MOBILE_TASK_TIMEOUT
from workflows.mobile import MobileAgentRun
from workflows.mobile_models import MobileAgentRunInput, MobileInput
from workflows.validation import WORKFLOW_ID_PREFIX as VALIDATION_PREFIX
from workflows.validation import ValidationRun
from workflows.validation_models import ValidationInput, ValidationRunInput


@dataclass(frozen=True)
class RunKind:
    name: str
    workflow_id_prefix: str
    start: Callable[[Client, str, RunRow], Awaitable[None]]

    def workflow_id(self, run_id: Any) -> str:
        return f"{self.workflow_id_prefix}{run_id}"


def initial_search_attributes(run: RunRow) -> TypedSearchAttributes:
    return TypedSearchAttributes([
        SearchAttributePair(sa.KIND, run.kind), SearchAttributePair(sa.OWNER, run.owner),
        SearchAttributePair(sa.STATUS, "pending"), SearchAttributePair(sa.PHASE, 0),
        SearchAttributePair(sa.AWAITING_HUMAN, False)])


def _summary(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


async def _start_validation(client: Client, task_queue: str, run: RunRow) -> None:
    run_input = ValidationInput.model_validate(run.input)
    await client.start_workflow(
        ValidationRun.run,
        ValidationRunInput(run_id=run.id, owner=run.owner, input=run_input),
        id=run.workflow_id, task_queue=task_queue,
        # A second start of the same run (an idempotent retry) attaches to the first.
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        search_attributes=initial_search_attributes(run),
        static_summary=f"Validation run for {run.owner}: "
                       f"{_summary(run_input.entrepreneur_input)}",
        static_details=f"run {run.id} · gates: {', '.join(run_input.gates) or 'none'} · "
                       f"expiry policy: {run_input.expiry_policy}")


async def _start_batch(client: Client, task_queue: str, run: RunRow) -> None:
    job = BatchInput.model_validate(run.input)
    source = f"{len(job.items)} items" if job.items is not None else job.items_path
    # The items stay in the run's row: the workflow gets the spec only, and a prepare
    # activity copies the items to work_units.
    await client.start_workflow(
        BatchJob.run, BatchRunInput(run_id=run.id, owner=run.owner, spec=job.spec()),
        id=run.workflow_id, task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        search_attributes=initial_search_attributes(run),
        static_summary=f"Batch job for {run.owner}: {_summary(job.name)}",
        static_details=f"run {run.id} · {source} · steps: "
                       f"{' → '.join(s.name for s in job.steps)} · "
                       f"max_workers {job.max_workers}, max_retries {job.max_retries}")


async def _start_mobile(client: Client, task_queue: str, run: RunRow) -> None:
    run_input = MobileInput.model_validate(run.input)
    await client.start_workflow(
        MobileAgentRun.run, MobileAgentRunInput(run_id=run.id, owner=run.owner, input=run_input),
        id=run.workflow_id, task_queue=task_queue, task_timeout=MOBILE_TASK_TIMEOUT,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        search_attributes=initial_search_attributes(run),
        static_summary=f"Explore {run_input.app_package} ({run_input.driver}) for {run.owner}",
        static_details=f"run {run.id} · up to {run_input.max_steps} steps · policy "
                       f"{run_input.policy} · sensitive actions: {run_input.sensitive_actions}")


KINDS: dict[str, RunKind] = {
    kind.name: kind for kind in [
        RunKind("validation", VALIDATION_PREFIX, _start_validation),
        RunKind("batch", BATCH_PREFIX, _start_batch),
        RunKind("mobile_agent", MOBILE_PREFIX, _start_mobile),
    ]
}


def kind_named(name: str) -> RunKind:
    return KINDS[name]

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


KINDS: dict[str, RunKind] = {
    kind.name: kind for kind in [
        RunKind("validation", VALIDATION_PREFIX, _start_validation),
    ]
}


def kind_named(name: str) -> RunKind:
    return KINDS[name]

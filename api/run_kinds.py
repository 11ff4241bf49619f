"""How each run kind starts its workflow: the one table a new kind is added to."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
)

from persistence.models import RunRow
from workflows import search_attributes as sa
from workflows.validation import ValidationRun, validation_workflow_id
from workflows.validation_models import ValidationInput, ValidationRunInput

WORKFLOW_IDS = {"validation": validation_workflow_id}


def workflow_id_for(kind: str, run_id: Any) -> str:
    return WORKFLOW_IDS[kind](run_id)


async def start_workflow(client: Client, task_queue: str, run: RunRow) -> None:
    """Start the run's workflow; a second start of the same run attaches to the first."""
    search = TypedSearchAttributes([
        SearchAttributePair(sa.KIND, run.kind), SearchAttributePair(sa.OWNER, run.owner),
        SearchAttributePair(sa.STATUS, "pending"), SearchAttributePair(sa.PHASE, 0),
        SearchAttributePair(sa.AWAITING_HUMAN, False)])
    if run.kind == "validation":
        run_input = ValidationInput.model_validate(run.input)
        idea = run_input.entrepreneur_input
        await client.start_workflow(
            ValidationRun.run,
            ValidationRunInput(run_id=run.id, owner=run.owner, input=run_input),
            id=run.workflow_id, task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            search_attributes=search,
            static_summary=f"Validation run for {run.owner}: "
                           f"{idea[:80]}{'…' if len(idea) > 80 else ''}",
            static_details=f"run {run.id} · gates: {', '.join(run_input.gates) or 'none'} · "
                           f"expiry policy: {run_input.expiry_policy}")
        return
    raise ValueError(f"unknown run kind {run.kind!r}")

"""The validation run as a registered run kind."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from activities.crew_tasks import CrewTaskActivities
from activities.deps import WorkerDeps
from contracts.kinds import RunKind, RunStart, shorten
from workflows.validation import ValidationRun
from workflows.validation_models import ValidationInput


def _activities(deps: WorkerDeps) -> Sequence[Callable[..., Any]]:
    return [CrewTaskActivities(deps.pool, deps.backend).run_crew_task]


def _summary(run: RunStart) -> str:
    return f"Validation run for {run.owner}: {shorten(run.input.entrepreneur_input)}"


def _details(run: RunStart) -> str:
    return (f"run {run.run_id} · gates: {', '.join(run.input.gates) or 'none'} · "
            f"expiry policy: {run.input.expiry_policy}")


VALIDATION = RunKind(
    name="validation", workflow=ValidationRun, input_model=ValidationInput,
    workflow_id_prefix="validation-", summary=_summary, details=_details,
    activities=_activities,
    description="Five phases of crew work with human gates (seed 000).")

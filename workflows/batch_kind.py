"""The batch job as a registered run kind."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from activities.batch.items import BatchActivities
from activities.deps import WorkerDeps
from contracts.kinds import RunKind, RunStart, shorten
from workflows.batch import BatchJob
from workflows.batch_models import BatchInput, BatchRunInput


def _activities(deps: WorkerDeps) -> Sequence[Callable[..., Any]]:
    batch = BatchActivities(deps.pool, deps.backend, items_sources=deps.items_sources)
    return [batch.prepare_job, batch.run_slice, batch.run_item]


def _build_input(run: RunStart) -> BatchRunInput:
    # The items stay in the run's row: the workflow gets the spec only, and a prepare
    # activity copies the items to work_units.
    return BatchRunInput(run_id=run.run_id, owner=run.owner, spec=run.input.spec())


def _summary(run: RunStart) -> str:
    return f"Batch job for {run.owner}: {shorten(run.input.name)}"


def _details(run: RunStart) -> str:
    job: BatchInput = run.input
    source = f"{len(job.items)} items" if job.items is not None else job.items_path
    return (f"run {run.run_id} · {source} · steps: {' → '.join(s.name for s in job.steps)} · "
            f"max_workers {job.max_workers}, max_retries {job.max_retries}")


BATCH = RunKind(
    name="batch", workflow=BatchJob, input_model=BatchInput, workflow_id_prefix="batch-",
    summary=_summary, details=_details, activities=_activities, build_input=_build_input,
    fork_refusal="a batch job is re-run, not forked: POST /jobs/{id}/rerun re-runs chosen "
                 "items from a chosen step as a new job, keeping their earlier outputs",
    description="Many items through a pipeline of prompt-template steps (seeds 002, 004).")

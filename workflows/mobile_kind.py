"""The mobile exploration run as a registered run kind."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from activities.deps import WorkerDeps
from activities.mobile.artifacts import LocalArtifactStore
from activities.mobile.steps import MobileActivities
from contracts.kinds import RunKind, RunStart
from workflows.mobile import WORKFLOW_TASK_TIMEOUT, MobileAgentRun
from workflows.mobile_models import MobileInput


def _activities(deps: WorkerDeps) -> Sequence[Callable[..., Any]]:
    store = LocalArtifactStore(deps.artifact_dir) if deps.artifact_dir else None
    return [MobileActivities(deps.pool, store).explore_step]


def _summary(run: RunStart) -> str:
    return f"Explore {run.input.app_package} ({run.input.driver}) for {run.owner}"


def _details(run: RunStart) -> str:
    inp: MobileInput = run.input
    return (f"run {run.run_id} · up to {inp.max_steps} steps · policy {inp.policy} · "
            f"sensitive actions: {inp.sensitive_actions}")


MOBILE = RunKind(
    name="mobile_agent", workflow=MobileAgentRun, input_model=MobileInput,
    workflow_id_prefix="mobile-", summary=_summary, details=_details, activities=_activities,
    task_timeout=WORKFLOW_TASK_TIMEOUT,
    # A snapshot holds the screen graph, not the device: the app's own state (its data, its
    # back stack, who is logged in) is on the device and cannot be put back from a snapshot.
    fork_refusal="a mobile run's screen lives on its device, not in its snapshots: a fork "
                 "could not put the app back on that screen; start a new run instead",
    description="An agent explores an Android app and records its screen graph (seed 001).")

"""The validation run as a registered run kind."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from waystation.kinds.validation.activities.crew_tasks import CrewTaskActivities
from waystation.kinds.validation.demo import DEMO
from waystation.kinds.validation.models import (
    ValidationInput,
    ValidationRunInput,
    ValidationRunState,
    ValidationStart,
)
from waystation.kinds.validation.offline_answers import ANSWERS
from waystation.kinds.validation.phases import PHASES, phase_completed
from waystation.kinds.validation.workflow import ValidationRun
from waystation.sdk import (
    ApiHooks,
    CliHooks,
    DecisionInput,
    ForkHooks,
    ForkPoint,
    ForkRefused,
    RunKind,
    RunStart,
    StartCheck,
    WorkerDeps,
    WorkerHooks,
    shorten,
)
from waystation.sdk.agents import answers_in_place, backend_named


def _activities(deps: WorkerDeps) -> Sequence[Callable[..., Any]]:
    assert deps.read_model is not None  # build_worker gives every kind the recorder
    return [CrewTaskActivities(deps.pool, deps.backend, deps.read_model).run_crew_task]


def _summary(run: RunStart) -> str:
    return f"Validation run for {run.owner}: {shorten(run.input.entrepreneur_input)}"


def _details(run: RunStart) -> str:
    return (f"run {run.run_id} · gates: {', '.join(run.input.gates) or 'none'} · "
            f"expiry policy: {run.input.expiry_policy}")


async def _start_check(start: StartCheck) -> None:
    """Settle `tasks: auto` before the run is written, so its stored input (which its workflow,
    its replays and its forks read) says how its tasks run: in place when the backend the
    settings name answers at once. The API and the workers read the same settings
    (WAYSTATION_AGENT_BACKEND, WAYSTATION_OFFLINE_DELAY_MS); were they to differ, the tasks
    would still run, only on the other path."""
    if start.input.tasks == "auto":
        start.input.tasks = "in_place" if _backend_in_place(start.settings) else "activity"


def _backend_in_place(settings: Any) -> bool:
    # Only the built-in noop and offline backends are cheap to build here and may answer at
    # once; an HTTP provider or a plug-in's backend does not.
    if settings.agent_backend not in ("noop", "offline"):
        return False
    return answers_in_place(backend_named(settings.agent_backend,
                                          delay_ms=settings.offline_delay_ms))


def _fork(run: RunStart, point: ForkPoint) -> ValidationRunInput:
    """A validation run from the snapshot's phase: at its gate when the phase had done its work
    (its outputs kept), else from the phase's first task."""
    state = ValidationRunState.model_validate(point.state)
    phase = PHASES[state.current_phase]
    at_gate = point.checkpoint == phase.checkpoint or point.label in (
        phase_completed(phase.number), "completed")  # the lifecycle's last snapshot
    decision = None
    if point.decision is not None:
        if point.checkpoint != phase.checkpoint:
            raise ForkRefused(f"snapshot {point.snapshot} waits at {point.checkpoint!r}, and a "
                              f"fork from it re-runs phase {phase.number} from its first task: "
                              f"only the phase's gate {phase.checkpoint!r} takes a decision",
                              field="decision", code="invalid_request")
        if phase.checkpoint not in run.input.gates:
            raise ForkRefused(f"the fork's input has no gate {phase.checkpoint!r} to decide",
                              field="decision", code="invalid_request")
        decision = DecisionInput.model_validate(point.decision)
    return ValidationRunInput(run_id=run.run_id, owner=run.owner, input=run.input,
                              start_from=ValidationStart(state=state, at_gate=at_gate,
                                                         decision=decision,
                                                         forked_from=point.forked_from))


VALIDATION = RunKind(
    name="validation", workflow=ValidationRun, input_model=ValidationInput,
    workflow_id_prefix="validation-", summary=_summary, details=_details,
    api=ApiHooks(start_check=_start_check),
    worker=WorkerHooks(activities=_activities, offline_answers=ANSWERS),
    forks=ForkHooks(start=_fork), cli=CliHooks(demo=DEMO),
    description="Five phases of crew work with human gates (seed 000).")

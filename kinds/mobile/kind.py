"""The mobile exploration run as a registered run kind."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

from waystation.kinds.mobile import repository as graph_repo
from waystation.kinds.mobile.activities.steps import MobileActivities
from waystation.kinds.mobile.models import (
    MobileAgentRunInput,
    MobileFork,
    MobileInput,
    MobileRunState,
)
from waystation.kinds.mobile.settings import MobileSettings
from waystation.kinds.mobile.workflow import WORKFLOW_TASK_TIMEOUT, MobileAgentRun
from waystation.sdk import (
    ApiHooks,
    CliCommand,
    CliHooks,
    ConsoleHooks,
    DataHooks,
    ForkHooks,
    ForkPoint,
    ForkRefused,
    KindRetention,
    RunKind,
    RunListFilter,
    RunResource,
    RunStart,
    StartCheck,
    ViewContext,
    WorkerDeps,
    WorkerHooks,
)
from waystation.sdk.artifacts import LocalArtifactStore
from waystation.sdk.schemas import PACKAGE_PATTERN


def _activities(deps: WorkerDeps) -> Sequence[Callable[..., Any]]:
    store = LocalArtifactStore(deps.artifact_dir) if deps.artifact_dir else None
    activities = MobileActivities(deps.pool, store)
    return [activities.explore_step, activities.restore_fork]


def _summary(run: RunStart) -> str:
    return f"Explore {run.input.app_package} ({run.input.driver}) for {run.owner}"


def _details(run: RunStart) -> str:
    inp: MobileInput = run.input
    return (f"run {run.run_id} · up to {inp.max_steps} steps · policy {inp.policy} · "
            f"sensitive actions: {inp.sensitive_actions}")


async def _start_check(start: StartCheck) -> None:
    """A device attached to the worker is driven only by whom the operator allows; the
    simulator explores only the apps it has."""
    from waystation.kinds.mobile.device_policy import (  # the API's, not the worker's
        check_app,
        check_device,
    )

    check_device(start.input, start.user, start.settings)
    check_app(start.input)


async def _view(view: ViewContext) -> dict[str, Any]:
    """The run's app, from the kind's own `mobile_runs`."""
    return {"app_package": await graph_repo.run_app_package(view.conn, view.run.id)}


# `GET /runs?app_package=` and the console's runs page: an app's runs.
APP_PACKAGE_FILTER = RunListFilter(
    name="app_package", label="App package", description="Only mobile runs of this app",
    runs=graph_repo.sql("runs_of_app"), pattern=PACKAGE_PATTERN, max_length=200,
    placeholder="com.example.app")


def _routers() -> list[Any]:
    from waystation.kinds.mobile import routes  # the API's, never the worker's

    return [routes.router]


def _mcp_run_resources() -> list[RunResource]:
    from waystation.kinds.mobile import service  # the API's, never the worker's

    return [RunResource(name="screen_graph", part="/graph",
                        description="The screen graph a mobile_agent run explored: screens and "
                                    "the actions between them.",
                        read=service.run_graph)]


def _simulator(parser: Any) -> None:
    parser.add_subparsers(dest="simulator_command", required=True, metavar="ACTION").add_parser(
        "list", help="print the bundled sample apps' packages, one a line")


def _simulator_list(settings: Any, args: Any) -> int:
    from waystation.kinds.mobile.activities.simulator.driver import bundled_packages

    print("\n".join(bundled_packages()))
    return 0


def _fork(run: RunStart, point: ForkPoint) -> MobileAgentRunInput:
    """A new exploration from the screen the snapshot's step stood at, carrying the graph
    recorded up to that step (waystation.kinds.mobile.workflow `_restore`)."""
    inp: MobileInput = run.input
    state = MobileRunState.model_validate(point.state)
    if point.decision is not None:
        raise ForkRefused("a mobile fork starts from a step, and asks again before any "
                          "sensitive action it comes to: there is no decision to amend",
                          field="decision", code="invalid_request")
    if inp.app_package != state.app_package:
        raise ForkRefused(f"a fork explores its source's app, {state.app_package}",
                          field="input.app_package", code="invalid_request")
    if not inp.persist:
        raise ForkRefused("a fork carries on from the recorded graph: it must record its own",
                          field="input.persist", code="invalid_request")
    if inp.max_steps <= state.step:
        raise ForkRefused(f"the fork carries on after step {state.step}: max_steps counts "
                          "from the source's first step", field="input.max_steps",
                          code="invalid_request")
    return MobileAgentRunInput(run_id=run.run_id, owner=run.owner, input=inp, fork=MobileFork(
        source_run_id=point.source_run_id, state=state, forked_from=point.forked_from))


MOBILE = RunKind(
    name="mobile_agent", workflow=MobileAgentRun, input_model=MobileInput,
    workflow_id_prefix="mobile-", summary=_summary, details=_details,
    task_timeout=WORKFLOW_TASK_TIMEOUT, settings=MobileSettings,
    api=ApiHooks(routers=_routers, start_check=_start_check, view=_view,
                 run_filters=[APP_PACKAGE_FILTER], mcp_run_resources=_mcp_run_resources),
    console=ConsoleHooks(module=resources.files(__package__) / "console.js"),
    worker=WorkerHooks(activities=_activities),
    data=DataHooks(migrations=resources.files(__package__) / "migrations",
                   retention=KindRetention(archive=graph_repo.archive_sections,
                                           forget_artifacts=graph_repo.forget_artifacts)),
    forks=ForkHooks(start=_fork),
    cli=CliHooks(commands=[CliCommand(name="simulator", help="the offline app simulator",
                                      configure=_simulator, run=_simulator_list)]),
    description="An agent explores an Android app and records its screen graph (seed 001).")

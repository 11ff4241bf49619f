"""Which workflows run in Temporal's sandbox.

The sandbox re-imports a workflow's module for every run and passes each activation and
payload through its own interpreter frames; on the peers benchmark that was a third of a
toy run's time (86 against 57 ms a run, 21–23 against 27–29 runs/s at 20 concurrent). So
Waystation's own workflows are declared `sandboxed=False`, while a team's plug-in kind runs
sandboxed unless its author declares otherwise, as Temporal's default is.

What the sandbox checks (no clock, randomness or I/O from workflow code) is still checked for
the built-in workflows: the test suite sets WAYSTATION_SANDBOX_EVERY_WORKFLOW, and every
worker it starts runs them in the sandbox (`SandboxEveryWorkflow`), except those that cannot
run there at all.
"""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.worker import (
    UnsandboxedWorkflowRunner,
    WorkflowInstance,
    WorkflowInstanceDetails,
    WorkflowRunner,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from waystation.workflows.definitions import WorkflowDefinition

# AgentRun's agent (model, toolsets) lives in the worker process and is found by name: a
# sandbox's re-imported registry would be empty.
OUTSIDE_SANDBOX_ONLY = frozenset({"AgentRun"})


class SandboxEveryWorkflow(WorkflowRunner):
    """The runner for workflows declared `sandboxed=False` that runs them sandboxed anyway."""

    def __init__(self) -> None:
        self._sandboxed = SandboxedWorkflowRunner()
        self._unsandboxed = UnsandboxedWorkflowRunner()

    def _runner(self, defn: WorkflowDefinition) -> WorkflowRunner:
        return self._unsandboxed if defn.name in OUTSIDE_SANDBOX_ONLY else self._sandboxed

    def prepare_workflow(self, defn: WorkflowDefinition) -> None:
        self._runner(defn).prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return self._runner(det.defn).create_instance(det)

    def set_worker_level_failure_exception_types(
            self, types: Sequence[type[BaseException]]) -> None:
        self._sandboxed.set_worker_level_failure_exception_types(types)

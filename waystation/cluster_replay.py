"""Replaying the cluster's own histories against the code installed now (`waystation replay`).

A run may wait at a gate for weeks, so a deploy is safe only if every open run's history still
replays on the new code. This fetches the histories of the open executions (and a sample of
closed ones) from the cluster and replays each; a run that would break is reported with the
replayer's nondeterminism error, which names the first command the new code issues that the
history does not have.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from temporalio.client import Client, WorkflowExecution, WorkflowHistory
from temporalio.worker import Replayer

from waystation.temporal_client import DATA_CONVERTER
from waystation.workflows.definitions import workflow_type

# The SDK core reports a failed activation as its Rust debug text; the message inside it is
# the nondeterminism error an operator needs.
_CORE_MESSAGE = re.compile(r'message: "((?:[^"\\]|\\.)*)"')

OPEN_QUERY = "ExecutionStatus = 'Running'"
CLOSED_QUERY = "ExecutionStatus != 'Running'"


@dataclass(frozen=True)
class ReplayCheck:
    workflow_id: str
    run_id: str
    workflow_type: str
    is_open: bool
    error: str | None  # None: replays on the code installed now


def scoped(query: str, extra: str | None) -> str:
    """`query` narrowed by an operator's own visibility filter."""
    return f"{query} AND ({extra})" if extra else query


async def executions(client: Client, *, closed: int = 0,
                     query: str | None = None) -> AsyncIterator[WorkflowExecution]:
    """Every open execution, then at most `closed` closed ones (the most recent first)."""
    async for execution in client.list_workflows(scoped(OPEN_QUERY, query)):
        yield execution
    if closed > 0:
        async for execution in client.list_workflows(scoped(CLOSED_QUERY, query), limit=closed):
            yield execution


async def fetch_history(client: Client, execution: WorkflowExecution) -> WorkflowHistory:
    handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
    return await handle.fetch_history()


async def check_runs(client: Client, workflows: Sequence[type], *, closed: int = 0,
                     query: str | None = None) -> list[ReplayCheck]:
    """Replay each selected execution's history; one result per execution."""
    known = {workflow_type(w) for w in workflows}
    replayer = Replayer(workflows=workflows, data_converter=DATA_CONVERTER)
    checks = []
    async for execution in executions(client, closed=closed, query=query):
        is_open = execution.close_time is None
        if execution.workflow_type not in known:
            # The replayer would fail the task too; saying why is more useful than its text.
            checks.append(ReplayCheck(execution.id, execution.run_id or "",
                                      execution.workflow_type, is_open,
                                      f"workflow type {execution.workflow_type!r} is not "
                                      "registered in the code installed now"))
            continue
        history = await fetch_history(client, execution)
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        error = failure_text(result.replay_failure) if result.replay_failure else None
        checks.append(ReplayCheck(execution.id, execution.run_id or "",
                                  execution.workflow_type, is_open, error))
    return checks


def failure_text(failure: BaseException) -> str:
    """The first failure message inside the replayer's error, else the error as it is."""
    text = str(failure)
    found = _CORE_MESSAGE.search(text)
    return found.group(1) if found else text


def report(checks: Sequence[ReplayCheck]) -> tuple[str, int]:
    """The text `waystation replay` prints and its exit status (1 when any run would break)."""
    broken = [c for c in checks if c.error is not None]
    lines = [f"BREAKS {c.workflow_type} {c.workflow_id} run {c.run_id} "
             f"({'open' if c.is_open else 'closed'}): {c.error}" for c in broken]
    opened = sum(c.is_open for c in checks)
    lines.append(f"replayed {len(checks)} executions ({opened} open, {len(checks) - opened} "
                 f"closed): {len(broken)} would break")
    return "\n".join(lines), 1 if broken else 0

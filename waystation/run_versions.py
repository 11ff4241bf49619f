"""Open runs grouped by the code that started them (`waystation runs --open --by-version`).

Before retiring old workers (or old code paths guarded by `workflow.patched`), an operator needs
to know which code the waiting runs began on. The first completed workflow task of a history
records it: the Worker Deployment version when the worker used Worker Versioning, else the
worker's build id (which the Python SDK fills, without versioning, with its default build id: a
hash of the code the worker loaded), else the binary checksum; beside the SDK's name and version
when the history records them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from temporalio.api.history.v1 import WorkflowTaskCompletedEventAttributes
from temporalio.client import Client, WorkflowHistory

from waystation.cluster_replay import executions, fetch_history


@dataclass(frozen=True)
class RunVersion:
    workflow_id: str
    workflow_type: str
    version: str


def _version_of(task: WorkflowTaskCompletedEventAttributes) -> str:
    if task.deployment_version.build_id:
        return (f"deployment {task.deployment_version.deployment_name}"
                f":{task.deployment_version.build_id}")
    if task.worker_deployment_version:
        return f"deployment {task.worker_deployment_version}"
    sdk = f"{task.sdk_metadata.sdk_name} {task.sdk_metadata.sdk_version}".strip()
    code = (f"build-id {task.worker_version.build_id}" if task.worker_version.build_id
            else f"checksum {task.binary_checksum or '-'}")
    return code + (f" ({sdk})" if sdk else "")


def started_by(history: WorkflowHistory) -> str:
    """The code that completed the history's first workflow task."""
    for event in history.events:
        if event.HasField("workflow_task_completed_event_attributes"):
            return _version_of(event.workflow_task_completed_event_attributes)
    return "not started by any worker yet"


async def open_run_versions(client: Client, *, query: str | None = None) -> list[RunVersion]:
    return [RunVersion(execution.id, execution.workflow_type,
                       started_by(await fetch_history(client, execution)))
            async for execution in executions(client, query=query)]


def by_version(runs: Sequence[RunVersion]) -> str:
    """One block per version, the largest first: its count, then its runs."""
    groups: dict[str, list[RunVersion]] = defaultdict(list)
    for run in runs:
        groups[run.version].append(run)
    lines = []
    for version, members in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
        lines.append(f"{version}: {len(members)} open")
        lines.extend(f"  {run.workflow_type} {run.workflow_id}" for run in members)
    lines.append(f"{len(runs)} open runs, {len(groups)} versions")
    return "\n".join(lines)

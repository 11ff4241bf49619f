"""Starting a notification workflow exactly once from an activity that may be retried."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError


async def start_once(client: Client, workflow: str, arg: BaseModel, *, workflow_id: str,
                     task_queue: str, summary: str) -> None:
    """Start `workflow` under `workflow_id` unless one ever ran under it: a retried or
    replayed caller starts nothing twice (REJECT_DUPLICATE also refuses a finished one).

    Eager start: the caller is an activity of this worker, on its client and task queue, so the
    server hands the new workflow's first task back in the start's answer instead of through a
    poll (when the worker has a free slot; otherwise it dispatches as usual). A notification's
    first attempt runs in that task (workflows/webhook_notification.py)."""
    try:
        await client.start_workflow(workflow, arg, id=workflow_id, task_queue=task_queue,
                                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                                    static_summary=summary, request_eager_start=True)
    except WorkflowAlreadyStartedError:
        pass

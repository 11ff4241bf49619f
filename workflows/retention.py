"""The retention sweep: deletes (or archives, then deletes) runs past their retention.

Started by the Temporal Schedule `waystation-retention` (waystation/retention_schedule.py).
Runs finished more than `retention_days` ago and runs erased more than `erasure_grace_hours`
ago are removed a batch at a time, each batch one activity, until a batch comes back short.
The cut-offs are taken once from `workflow.now()`, so a replay computes the same ones.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from waystation.activities.retention import RetentionActivities
    from waystation.workflows.retention_models import (
        PurgeBatchInput,
        RetentionSweepInput,
        RetentionSweepResult,
    )

BATCH_TIMEOUT = timedelta(minutes=10)
BATCH_HEARTBEAT = timedelta(minutes=2)
BATCH_RETRY = RetryPolicy(initial_interval=timedelta(seconds=5),
                          maximum_interval=timedelta(minutes=2), maximum_attempts=10)


@workflow.defn(name="RetentionSweep", sandboxed=False)  # see waystation/sandboxing.py
class RetentionSweep:
    @workflow.run
    async def run(self, arg: RetentionSweepInput) -> RetentionSweepResult:
        now = workflow.now()
        batch = PurgeBatchInput(
            finished_before=(now - timedelta(days=arg.retention_days)
                             if arg.retention_days is not None else None),
            erased_before=now - timedelta(hours=arg.erasure_grace_hours),
            batch_size=arg.batch_size)
        result = RetentionSweepResult(runs_deleted=0, artifacts_deleted=0, archives=[])
        for _ in range(arg.max_batches):
            done = await workflow.execute_activity_method(
                RetentionActivities.purge_batch, batch, start_to_close_timeout=BATCH_TIMEOUT,
                heartbeat_timeout=BATCH_HEARTBEAT, retry_policy=BATCH_RETRY)
            result.runs_deleted += done.runs_deleted
            result.artifacts_deleted += done.artifacts_deleted
            result.users_erased += done.users_erased
            if done.archive:
                result.archives.append(done.archive)
            if done.runs_deleted < arg.batch_size:
                break
            if arg.batch_pause_seconds:
                await workflow.sleep(timedelta(seconds=arg.batch_pause_seconds))
        return result

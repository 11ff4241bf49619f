"""The retention sweep's one activity: archive (optionally) and delete one batch of runs.

Each batch is removed from Temporal first and then from Postgres, so a retried attempt finds
the same runs again (their rows are still there) and deleting their executions a second time
is a harmless NotFound. The archive file is named after the batch's run ids, so a retry
overwrites the same file instead of writing a second copy.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from uuid import UUID

import asyncpg
from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from waystation.activities.artifacts import ArtifactStore
from waystation.contracts.kinds import KindRetention
from waystation.persistence import erasure as erasure_repo
from waystation.persistence import events as events_repo
from waystation.persistence import retention as retention_repo
from waystation.workflows.retention_models import PurgeBatchInput, PurgeBatchResult


class RetentionActivities:
    def __init__(self, pool: asyncpg.Pool, client: Client, *, store: ArtifactStore | None,
                 archive_dir: Path | None, kinds: Sequence[KindRetention] = ()) -> None:
        self._pool = pool
        self._kinds = tuple(kinds)  # each registered kind's share (DataHooks.retention)
        self._client = client
        self._store = store
        self._archive_dir = archive_dir

    @activity.defn(name="purge_runs_batch")
    async def purge_batch(self, arg: PurgeBatchInput) -> PurgeBatchResult:
        async with self._pool.acquire() as conn:
            # Scheduled sweeps keep next months' partitions ahead and drop the months they emptied.
            await events_repo.maintain_partitions(conn)
            due = await retention_repo.runs_to_purge(
                conn, finished_before=arg.finished_before, erased_before=arg.erased_before,
                limit=arg.batch_size)
            run_ids = [run_id for run_id, _ in due]
            archive = (await self._archive(conn, run_ids)
                       if due and self._archive_dir is not None else None)
        for _, workflow_id in due:
            await self._delete_execution(workflow_id)
            activity.heartbeat()
        orphaned = await retention_repo.delete_runs(self._pool, run_ids, self._kinds) if due else []
        if self._store is not None:
            for sha in orphaned:
                self._store.delete(sha)
        # A short batch is the sweep's last: the erased users' runs are gone by now, so the
        # rest of their personal rows can go too.
        users = (await erasure_repo.erase_due_users(self._pool,
                                                    requested_before=arg.erased_before)
                 if len(due) < arg.batch_size and arg.erased_before is not None else 0)
        return PurgeBatchResult(runs_deleted=len(due), artifacts_deleted=len(orphaned),
                                archive=str(archive) if archive else None, users_erased=users)

    async def _archive(self, conn: asyncpg.Connection, run_ids: list[UUID]) -> Path:
        assert self._archive_dir is not None
        documents = await retention_repo.archive_documents(conn, run_ids, self._kinds)
        name = hashlib.sha256(",".join(sorted(map(str, run_ids))).encode()).hexdigest()[:16]
        self._archive_dir.mkdir(parents=True, exist_ok=True)
        target = self._archive_dir / f"runs-{name}.jsonl.gz"
        partial = target.with_suffix(".partial")
        with gzip.open(partial, "wt", encoding="utf-8") as out:
            out.writelines(document + "\n" for document in documents)
        # Only a whole file gets the final name: the rows are deleted after this returns.
        os.replace(partial, target)
        return target

    async def _delete_execution(self, workflow_id: str) -> None:
        """Delete the run's latest execution (a running one is terminated first)."""
        try:
            await self._client.workflow_service.delete_workflow_execution(
                DeleteWorkflowExecutionRequest(
                    namespace=self._client.namespace,
                    workflow_execution=WorkflowExecution(workflow_id=workflow_id)))
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise

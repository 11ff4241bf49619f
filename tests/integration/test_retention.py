"""Retention: the sweep deletes (and archives) runs finished long ago, every row and artifact
of them and their Temporal executions, and touches no other run."""

from __future__ import annotations

import gzip
import json
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from tests.helpers import eventually
from tests.retention_helpers import RUN_TABLES, rows_of, seed_run, start_execution
from waystation.activities.agents import backend_named
from waystation.activities.artifacts import LocalArtifactStore
from waystation.retention_schedule import SCHEDULE_ID, ensure_retention_schedule
from waystation.settings import Settings
from waystation.worker import build_worker
from waystation.workflows.retention import RetentionSweep
from waystation.workflows.retention_models import RetentionSweepInput, RetentionSweepResult

# What seed_run writes for a run with its default 3 events.
SEEDED = {table: 3 if table == "run_events" else 1 for table in RUN_TABLES}


async def gone(client: Client, workflow_id: str) -> bool:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError as error:
        return error.status == RPCStatusCode.NOT_FOUND
    return False


async def sweep(env: WorkflowEnvironment, pool, task_queue: str, tmp_path: Path,
                sweep_input: RetentionSweepInput) -> RetentionSweepResult:
    async with build_worker(env.client, pool, task_queue=task_queue,
                            backend=backend_named("offline"),
                            artifact_dir=tmp_path / "artifacts",
                            retention_archive_dir=tmp_path / "archive"):
        return await env.client.execute_workflow(
            RetentionSweep.run, sweep_input, id=f"sweep-{uuid.uuid4()}", task_queue=task_queue)


async def test_sweep_archives_and_deletes_old_runs_only(dev_env, pool, task_queue,
                                                        tmp_path) -> None:
    store = LocalArtifactStore(tmp_path / "artifacts")
    old = [await seed_run(pool, store, owner="ret", finished_ago=timedelta(days=40), events=7)
           for _ in range(3)]
    recent, recent_sha = await seed_run(pool, store, owner="ret", finished_ago=timedelta(days=2))
    open_run, open_sha = await seed_run(pool, store, owner="ret", finished_ago=None)
    for run_id, _ in [*old, (recent, recent_sha)]:
        await start_execution(dev_env.client, run_id)

    result = await sweep(dev_env, pool, task_queue, tmp_path,
                         RetentionSweepInput(retention_days=30, batch_size=2,
                                             batch_pause_seconds=0))

    assert result.runs_deleted >= 3 and result.artifacts_deleted >= 3
    for run_id, sha in old:
        assert set((await rows_of(pool, run_id)).values()) == {0}
        assert store.path(sha) is None
        await eventually(lambda run_id=run_id: gone(dev_env.client, f"batch-{run_id}"))
    for run_id, sha in [(recent, recent_sha), (open_run, open_sha)]:
        assert await rows_of(pool, run_id) == SEEDED
        assert store.path(sha) is not None
    assert not await gone(dev_env.client, f"batch-{recent}")

    documents = [json.loads(line) for archive in result.archives
                 for line in gzip.open(archive, "rt")]
    archived = {d["run"]["id"]: d for d in documents}
    for run_id, _ in old:
        document = archived[str(run_id)]
        assert [e["seq"] for e in document["events"]] == list(range(1, 8))
        assert len(document["snapshots"]) == len(document["decisions"]) == 1
        assert document["job"]["run_id"] == str(run_id)
        assert len(document["work_units"]) == len(document["item_outputs"]) == 1
        assert len(document["graph_outcomes"]) == len(document["artifacts"]) == 1
        assert len(document["webhook_deliveries"][0]["attempts"]) == 1
    assert str(recent) not in archived and str(open_run) not in archived


async def test_schedule_is_created_once_and_follows_the_settings(dev_env) -> None:
    settings = Settings(TEMPORAL_TASK_QUEUE="retention-q", WAYSTATION_RETENTION_DAYS=30)
    await ensure_retention_schedule(dev_env.client, settings)
    await ensure_retention_schedule(
        dev_env.client, settings.model_copy(update={"retention_days": 7.0}))
    description = await dev_env.client.get_schedule_handle(SCHEDULE_ID).describe()
    action = description.schedule.action
    assert action.task_queue == "retention-q"  # type: ignore[attr-defined]
    sweep_input = await dev_env.client.data_converter.decode(action.args)  # type: ignore[attr-defined]
    assert sweep_input[0]["retention_days"] == 7.0
    await dev_env.client.get_schedule_handle(SCHEDULE_ID).delete()

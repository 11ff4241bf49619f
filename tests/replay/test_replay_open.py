"""`waystation replay --open` and `runs --open --by-version` against a run waiting at a gate.

The run is started by the released ValidationRun on the dev server and left waiting at its
first gate; the CLI then replays the cluster's history of it with the workflow class swapped
for a later variant under the same type name, as a deploy of that variant would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker._worker import load_default_build_id

from tests.helpers import eventually, new_validation_run
from tests.plugin_samples.validation_variants import PatchedTimerFirst, TimerFirst
from waystation import cli, registry
from waystation.activities.agents import backend_named
from waystation.cluster_replay import check_runs
from waystation.kinds.batch.workflow import BatchJob
from waystation.kinds.validation.kind import VALIDATION
from waystation.kinds.validation.workflow import ValidationRun
from waystation.persistence import runs as runs_repo
from waystation.worker import build_worker
from waystation.workflows.retention import RetentionSweep
from waystation.workflows.retention_models import RetentionSweepInput

GATE = "approve_founders_brief"


@pytest.fixture
async def waiting_run(dev_env: WorkflowEnvironment, pool, task_queue: str) -> str:
    """The workflow id of a released ValidationRun waiting at its first gate."""
    arg = await new_validation_run(pool)
    async with build_worker(dev_env.client, pool, task_queue=task_queue,
                            backend=backend_named("offline")):
        await dev_env.client.start_workflow(ValidationRun.run, arg, task_queue=task_queue,
                                            id=VALIDATION.workflow_id(arg.run_id))

        async def at_gate() -> bool:
            async with pool.acquire() as conn:
                run = await runs_repo.get_run(conn, arg.run_id)
            return run is not None and run.hitl_state == GATE
        await eventually(at_gate, timeout=60)
    return VALIDATION.workflow_id(arg.run_id)


def run_cli(monkeypatch: pytest.MonkeyPatch, dev_env: WorkflowEnvironment,
            workflow: type, argv: list[str], capsys: pytest.CaptureFixture[str],
            ) -> tuple[int, str]:
    """`waystation ARGV` on the dev server with ValidationRun's class swapped for `workflow`."""
    swapped = tuple(dataclasses.replace(k, workflow=workflow) if k.name == VALIDATION.name else k
                    for k in registry.builtin_kinds())
    monkeypatch.setattr(registry, "builtin_kinds", lambda: swapped)
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_env.client.service_client.config.target_host)
    monkeypatch.setenv("TEMPORAL_NAMESPACE", dev_env.client.namespace)
    status = cli.main(argv)
    return status, capsys.readouterr().out


async def test_replay_open_flags_an_unguarded_change_and_passes_a_patched_one(
        dev_env, waiting_run, monkeypatch, capsys) -> None:
    query = ["--query", f"WorkflowId = '{waiting_run}'"]

    def replay(workflow: type) -> tuple[int, str]:
        return run_cli(monkeypatch, dev_env, workflow, ["replay", "--open", *query], capsys)

    status, out = await asyncio.to_thread(replay, TimerFirst)
    assert status == 1, out
    assert f"BREAKS ValidationRun {waiting_run}" in out
    # The first mismatching command: the new code's timer where the history has an upsert.
    assert (f"{waiting_run} run " in out and " (open): [TMPRL1100] Nondeterminism error: Timer "
            "machine does not handle this event: HistoryEvent(id: 5, "
            "UpsertWorkflowSearchAttributes)\n" in out), out
    assert "replayed 1 executions (1 open, 0 closed): 1 would break" in out

    status, out = await asyncio.to_thread(replay, PatchedTimerFirst)
    assert (status, out.strip()) == (0, "replayed 1 executions (1 open, 0 closed): "
                                        "0 would break")
    status, out = await asyncio.to_thread(replay, ValidationRun)
    assert status == 0, out


async def test_replay_names_unregistered_types_and_samples_closed_runs(
        dev_env, waiting_run) -> None:
    checks = await check_runs(dev_env.client, [TimerFirst],
                              query=f"WorkflowId = '{waiting_run}'")
    assert [c.workflow_id for c in checks] == [waiting_run]
    assert checks[0].error is not None and checks[0].is_open
    other = f"nobody-{uuid.uuid4()}"
    assert await check_runs(dev_env.client, [TimerFirst], closed=5,
                            query=f"WorkflowId = '{other}'") == []
    unknown = await check_runs(dev_env.client, [BatchJob], query=f"WorkflowId = '{waiting_run}'")
    assert "'ValidationRun' is not registered" in (unknown[0].error or "")


async def test_runs_by_version_groups_by_the_starting_code(dev_env, waiting_run, monkeypatch,
                                                          capsys) -> None:
    status, out = await asyncio.to_thread(
        run_cli, monkeypatch, dev_env, ValidationRun,
        ["runs", "--open", "--by-version", "--query", f"WorkflowId = '{waiting_run}'"], capsys)
    assert status == 0
    header, member, total = out.strip().splitlines()
    # Without Worker Versioning: the SDK's default build id, a hash of the worker's code.
    assert header.startswith(f"build-id {load_default_build_id()}"), header
    assert "(temporal-python " in header and header.endswith(": 1 open"), header
    assert member == f"  ValidationRun {waiting_run}"
    assert total == "1 open runs, 1 versions"


async def test_replay_covers_the_retention_sweep_and_closed_runs(
        dev_env, pool, task_queue, monkeypatch, capsys) -> None:
    """Waystation's own workflow replays too (else every deploy check would flag it)."""
    sweep_id = f"sweep-{uuid.uuid4()}"
    async with build_worker(dev_env.client, pool, task_queue=task_queue,
                            backend=backend_named("offline")):
        await dev_env.client.execute_workflow(
            RetentionSweep.run, RetentionSweepInput(erasure_grace_hours=10_000),
            id=sweep_id, task_queue=task_queue)
    status, out = await asyncio.to_thread(
        run_cli, monkeypatch, dev_env, ValidationRun,
        ["replay", "--open", "--closed", "5", "--query", f"WorkflowId = '{sweep_id}'"], capsys)
    assert (status, out.strip()) == (0, "replayed 1 executions (0 open, 1 closed): "
                                        "0 would break")


def test_replay_refuses_a_negative_sample(capsys) -> None:
    assert cli.main(["replay", "--open", "--closed", "-1"]) == 2
    assert "--closed must be 0 or more" in capsys.readouterr().err

"""MobileAgentRun on the time-skipping server, with the real graph in Postgres."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio
from mobile_helpers import NOTES, SHOP, ground_truth_keys, new_mobile_run, reachable_screens
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from waystation_mobile.kind import MOBILE
from waystation_mobile.models import MobileAgentRunInput, MobileAgentRunResult
from waystation_mobile.workflow import WORKFLOW_TASK_TIMEOUT, MobileAgentRun

from tests.helpers import eventually
from waystation.activities.agents import backend_named
from waystation.persistence import events as events_repo
from waystation.persistence import runs as runs_repo
from waystation.persistence import snapshots as snapshots_repo
from waystation.temporal_client import DATA_CONVERTER, register_search_attributes
from waystation.testing import installed_binary
from waystation.worker import build_worker
from waystation.workflows.gate_rules import DecisionInput


@pytest_asyncio.fixture
async def worker(time_env: WorkflowEnvironment, pool: asyncpg.Pool, task_queue: str,
                 tmp_path: Path) -> AsyncIterator[Worker]:
    async with build_worker(time_env.client, pool, task_queue=task_queue,
                            backend=backend_named("offline"), artifact_dir=tmp_path) as w:
        yield w


async def start(client: Client, arg: MobileAgentRunInput, task_queue: str) -> WorkflowHandle:
    return await client.start_workflow(MobileAgentRun.run, arg,
                                       id=MOBILE.workflow_id(arg.run_id), task_queue=task_queue,
                                       task_timeout=WORKFLOW_TASK_TIMEOUT)


async def app_keys(pool: asyncpg.Pool, package: str) -> list[tuple[str, str]]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT activity, layout_hash FROM screens "
                                "WHERE app_package = $1", package)
    return [(r["activity"], r["layout_hash"]) for r in rows]


@pytest.mark.parametrize("package", [NOTES, SHOP])
async def test_explores_app_to_ground_truth(time_env, pool, worker, task_queue, package):
    """Every reachable screen exactly once: no duplicates from volatile content, no merges."""
    arg = await new_mobile_run(pool, app_package=package, max_steps=600,
                               sensitive_actions="allow", seed=1)
    result: MobileAgentRunResult = await (await start(time_env.client, arg, task_queue)).result()
    print(result)
    assert result.stop_reason == "explored", result
    truth = await ground_truth_keys(package)
    reachable = {truth[name] for name in reachable_screens(package)}
    assert len(reachable) >= 15
    assert len(set(truth.values())) == len(truth)  # no two distinct screens share a key
    found = await app_keys(pool, package)
    assert len(found) == len(set(found))
    assert set(found) == reachable
    async with pool.acquire() as conn:
        run = await runs_repo.get_run(conn, arg.run_id)
        events = await events_repo.list_events(conn, arg.run_id, after_seq=0, limit=100_000)
        snapshots = await snapshots_repo.list_snapshots(conn, arg.run_id)
        unhashed = await conn.fetchval("SELECT count(*) FROM screens WHERE app_package = $1 "
                                       "AND phash IS NULL", package)
    assert run is not None and run.status == "completed"
    assert run.result and run.result["stop_reason"] == "explored"
    assert unhashed == 0  # each new screen's hash, computed once its step found it missing
    assert events[0].type == "run.started" and events[-1].type == "run.completed"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {e.task for e in events if e.type == "agent.node.completed"} == {
        "act", "observe", "identify", "persist", "choose"}
    assert len(snapshots) >= result.steps - 1


# About 30 s: in the slow tier, so the README's test command keeps its margin under 10 minutes
# (the released mobile_explore_continue_as_new history still replays in the fast one).
@pytest.mark.slow
async def test_long_run_continues_as_new_without_duplicates(time_env, pool, worker, task_queue):
    """2,000 steps in 10 histories of 200: no snapshot, event or outcome written twice."""
    arg = await new_mobile_run(pool, app_package=SHOP, max_steps=2000, policy="random",
                               continue_as_new_every=200, sensitive_actions="skip", seed=7)
    handle = await start(time_env.client, arg, task_queue)
    result: MobileAgentRunResult = await handle.result()
    assert result.stop_reason == "max_steps" and result.steps == 2000
    desc = await handle.describe()
    assert desc.history_length < 3000  # the last of ten histories, not all of them
    async with pool.acquire() as conn:
        steps = await conn.fetchval("SELECT count(*) FROM graph_persistence_outcomes "
                                    "WHERE run_id = $1", arg.run_id)
        last_seq = await conn.fetchval("SELECT last_seq FROM runs WHERE id = $1", arg.run_id)
        n_events = await conn.fetchval("SELECT count(*) FROM run_events WHERE run_id = $1",
                                       arg.run_id)
        ordinals = await conn.fetchval("SELECT count(*) FROM run_snapshots WHERE run_id = $1",
                                       arg.run_id)
    assert steps == 2000 and last_seq == n_events and ordinals >= 1990


async def test_sensitive_actions_wait_for_a_human(time_env, pool, worker, task_queue):
    arg = await new_mobile_run(pool, app_package=SHOP, max_steps=400, seed=2)
    handle = await start(time_env.client, arg, task_queue)
    decided: list[str] = []

    async def gate_or_done() -> str | None:
        desc = await handle.describe()
        if desc.status is not None and desc.status.name != "RUNNING":
            return "done"
        async with pool.acquire() as conn:
            run = await runs_repo.get_run(conn, arg.run_id)
        return run.hitl_state if run and run.hitl_state not in decided else None

    while (checkpoint := await eventually(gate_or_done)) != "done":
        assert checkpoint.startswith("sensitive_action_")
        decision = "approve" if not decided else "reject"
        view = await handle.execute_update(MobileAgentRun.decide, DecisionInput(
            checkpoint_name=checkpoint, decision=decision, decided_by="alice"))
        assert view.status == ("approved" if decision == "approve" else "rejected")
        decided.append(checkpoint)
    result: MobileAgentRunResult = await handle.result()
    assert result.stop_reason == "explored" and len(decided) >= 3
    async with pool.acquire() as conn:
        gates = await conn.fetch("SELECT checkpoint_name, status FROM hitl_requests "
                                 "WHERE run_id = $1", arg.run_id)
        approved_edge = await conn.fetchval(
            "SELECT count(*) FROM graph_persistence_outcomes WHERE run_id = $1 "
            "AND action_id = $2", arg.run_id, int(decided[0].rsplit("_", 1)[1]))
        rejected_tried = await conn.fetchval(
            "SELECT count(*) FROM graph_persistence_outcomes WHERE run_id = $1 "
            "AND action_id = ANY($2::bigint[])", arg.run_id,
            [int(c.rsplit("_", 1)[1]) for c in decided[1:]])
    assert {g["status"] for g in gates} == {"approved", "rejected"} and len(gates) == len(decided)
    assert approved_edge >= 1 and rejected_tried == 0


@pytest_asyncio.fixture
async def own_time_env() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping server of this test's own: the shared one stops skipping time while
    any other test's activity is left outstanding, and this test needs days to pass."""
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=DATA_CONVERTER,
        test_server_existing_path=installed_binary("temporal-test-server"))
    await register_search_attributes(env.client, "default")
    yield env
    await env.shutdown()


async def test_unanswered_sensitive_gate_defaults_to_skip(own_time_env, pool, task_queue,
                                                         tmp_path):
    arg = await new_mobile_run(pool, app_package=NOTES, max_steps=300, seed=4)
    async with build_worker(own_time_env.client, pool, task_queue=task_queue,
                            backend=backend_named("offline"), artifact_dir=tmp_path):
        handle = await start(own_time_env.client, arg, task_queue)
        # Nobody answers: each gate expires after a (skipped-through) day; the action is
        # skipped.
        result: MobileAgentRunResult = await handle.result()
    assert result.stop_reason == "explored"
    async with pool.acquire() as conn:
        statuses = {r["status"] for r in await conn.fetch(
            "SELECT status FROM hitl_requests WHERE run_id = $1", arg.run_id)}
    assert statuses == {"expired"}


async def test_cancel_records_the_stop_reason(time_env, pool, worker, task_queue):
    arg = await new_mobile_run(pool, app_package=NOTES, max_steps=100_000, policy="random",
                               sensitive_actions="skip")
    handle = await start(time_env.client, arg, task_queue)

    async def some_steps() -> bool:
        async with pool.acquire() as conn:
            return (await conn.fetchval("SELECT count(*) FROM graph_persistence_outcomes "
                                        "WHERE run_id = $1", arg.run_id)) >= 20
    await eventually(some_steps)
    await handle.cancel()
    async def canceled():
        async with pool.acquire() as conn:
            run = await runs_repo.get_run(conn, arg.run_id)
        return run if run and run.status == "canceled" else None
    run = await eventually(canceled)
    assert run.stop_reason == "canceled" and run.finished_at is not None


async def test_goal_activity_stops_the_run(time_env, pool, worker, task_queue):
    arg = await new_mobile_run(pool, app_package=NOTES, goal_activity=".SettingsActivity",
                               sensitive_actions="skip", seed=3)
    result: MobileAgentRunResult = await (await start(time_env.client, arg, task_queue)).result()
    assert result.stop_reason == "goal_reached"


async def test_driver_errors_spend_the_error_budget(time_env, pool, worker, task_queue,
                                                    monkeypatch):
    # An ADB driver with no adb: every step is a driver error (a regular, heartbeating
    # activity on this path), and the third one ends the run.
    monkeypatch.setenv("WAYSTATION_ADB", "/nonexistent/adb")
    arg = await new_mobile_run(pool, app_package=NOTES, driver="adb", max_errors=2)
    handle = await start(time_env.client, arg, task_queue)
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    async with pool.acquire() as conn:
        run = await runs_repo.get_run(conn, arg.run_id)
        failed = await conn.fetchval("SELECT count(*) FROM run_events WHERE run_id = $1 "
                                     "AND type = 'agent.node.failed'", arg.run_id)
    assert run is not None and run.status == "failed" and failed == 3
    assert run.result and run.result["stop_reason"] == "error_budget"

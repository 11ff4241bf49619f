"""Durability on the real dev server and Postgres: workers come and go, runs carry on.

The workflow history is the only checkpoint, so a run must survive a worker that is shut
down, one that keeps no cache at all, and one that is killed with SIGKILL in the middle of a
crew task, and the read model must come out gapless with every event written once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from activities.agents import backend_named
from persistence import events as events_repo
from persistence import runs as runs_repo
from persistence import snapshots as snapshots_repo
from tests.helpers import eventually, new_validation_run
from waystation.worker import build_worker
from workflows.gates import DecisionInput
from workflows.validation import ValidationRun, validation_workflow_id
from workflows.validation_models import ValidationRunInput
from workflows.validation_phases import PHASES

ROOT = Path(__file__).resolve().parent.parent
CREW_TASKS = sum(len(p.tasks) for p in PHASES)


async def start(client: Client, arg: ValidationRunInput, task_queue: str) -> WorkflowHandle:
    return await client.start_workflow(ValidationRun.run, arg,
                                       id=validation_workflow_id(arg.run_id),
                                       task_queue=task_queue)


async def wait_gate(pool: asyncpg.Pool, run_id: uuid.UUID, checkpoint: str,
                    timeout: float = 30.0) -> None:  # noqa: ASYNC109
    async def pending() -> bool:
        async with pool.acquire() as conn:
            run = await runs_repo.get_run(conn, run_id)
        return run is not None and run.hitl_state == checkpoint
    await eventually(pending, timeout=timeout)


async def decide(handle: WorkflowHandle, checkpoint: str, decision: str = "approve"):
    return await handle.execute_update(
        ValidationRun.decide,
        DecisionInput(checkpoint_name=checkpoint, decision=decision, decided_by="alice"))


async def assert_read_model_consistent(pool: asyncpg.Pool, run_id: uuid.UUID) -> list:
    """Gapless seq 1..N, every event_key once, snapshots numbered 1..K; returns the events."""
    async with pool.acquire() as conn:
        events = await events_repo.list_events(conn, run_id, after_seq=0, limit=10_000)
        duplicates = await conn.fetch(
            "SELECT event_key, count(*) AS n FROM run_events WHERE run_id = $1 "
            "GROUP BY event_key HAVING count(*) > 1", run_id)
        snapshots = await snapshots_repo.list_snapshots(conn, run_id)
        run = await runs_repo.get_run(conn, run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert run is not None and run.last_seq == len(events)
    assert duplicates == [], [dict(d) for d in duplicates]
    assert [s.step_ordinal for s in snapshots] == list(range(1, len(snapshots) + 1))
    return events


# --- 1. a worker shut down while a run waits at a gate ------------------------------------

async def test_run_survives_worker_restart_during_gate_wait(dev_env: WorkflowEnvironment,
                                                            pool, task_queue):
    client = dev_env.client
    arg = await new_validation_run(pool)
    async with build_worker(client, pool, task_queue=task_queue,
                            backend=backend_named("offline")):
        handle = await start(client, arg, task_queue)
        await wait_gate(pool, arg.run_id, "approve_founders_brief")
    # The first worker is gone completely; nothing of the run lives in any process now.
    async with pool.acquire() as conn:
        before = await events_repo.list_events(conn, arg.run_id, after_seq=0, limit=1000)

    async with build_worker(client, pool, task_queue=task_queue,
                            backend=backend_named("offline")):
        view = await decide(handle, "approve_founders_brief")
        assert view.status == "approved"
        await wait_gate(pool, arg.run_id, "approve_vpc_completion")
        state = await handle.query(ValidationRun.state)
        assert state.founders_brief is not None and state.customer_profile is not None
        assert state.phase_attempts == {0: 1, 1: 1}
    await handle.terminate("test done")

    events = await assert_read_model_consistent(pool, arg.run_id)
    assert events[: len(before)] == before  # the replay rewrote nothing
    assert [e.type for e in events].count("gate.decided") == 1
    assert [e.type for e in events].count("run.started") == 1


# --- 2. a worker with no workflow cache at all ---------------------------------------------

async def test_uncached_worker_runs_whole_run_with_three_decisions(dev_env: WorkflowEnvironment,
                                                                   pool, task_queue):
    client = dev_env.client
    arg = await new_validation_run(pool)
    async with build_worker(client, pool, task_queue=task_queue,
                            backend=backend_named("offline"), max_cached_workflows=0):
        handle = await start(client, arg, task_queue)
        for checkpoint in ("approve_founders_brief", "approve_vpc_completion",
                           "approve_desirability_gate"):
            await wait_gate(pool, arg.run_id, checkpoint)
            assert (await decide(handle, checkpoint)).status == "approved"
        result = await handle.result()
    assert result.status == "completed"

    events = await assert_read_model_consistent(pool, arg.run_id)
    completed = [e for e in events if e.type == "task.completed"]
    assert len(completed) == CREW_TASKS
    assert events[-1].type == "run.completed"


# --- 3. SIGKILL of a worker process in the middle of a crew task ---------------------------

class WorkerProcesses:
    """`python -m waystation worker` child processes; the ones still alive are killed at the end."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self._env, self._logs = env, logs
        self.procs: list[subprocess.Popen] = []

    def start(self) -> subprocess.Popen:
        log = open(self._logs / f"worker-{len(self.procs)}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen([sys.executable, "-m", "waystation", "worker"], cwd=ROOT,
                                env=self._env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(proc)
        return proc

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:]
                         for p in sorted(self._logs.glob("worker-*.log")))

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def worker_processes(dev_env: WorkflowEnvironment, migrated_url: str, task_queue: str,
                     tmp_path: Path) -> Iterator[WorkerProcesses]:
    env = {**os.environ,
           "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
           "TEMPORAL_NAMESPACE": dev_env.client.namespace,
           "TEMPORAL_TASK_QUEUE": task_queue,
           "DATABASE_URL": migrated_url,
           "WAYSTATION_AGENT_BACKEND": "offline",
           "WAYSTATION_OFFLINE_DELAY_MS": "300",
           "WAYSTATION_OTEL_EXPORTER": "none",
           "WAYSTATION_DATA_DIR": str(tmp_path / "data")}
    workers = WorkerProcesses(env, tmp_path)
    yield workers
    workers.stop_all()


@pytest_asyncio.fixture
async def cleanup_handles() -> AsyncIterator[list[WorkflowHandle]]:
    handles: list[WorkflowHandle] = []
    yield handles
    for handle in handles:
        try:
            await handle.terminate("test cleanup")
        except Exception:  # noqa: BLE001, S110 - already closed is fine
            pass


async def test_sigkill_mid_task_then_new_worker_completes_run(
        dev_env: WorkflowEnvironment, pool, task_queue, worker_processes, cleanup_handles):
    client = dev_env.client
    arg = await new_validation_run(pool, gates=[])
    first = worker_processes.start()
    handle = await start(client, arg, task_queue)
    cleanup_handles.append(handle)

    async def task_running_in_phase_1() -> list[str]:
        """Tasks of phase 1 started and not completed yet: the worker is inside one."""
        async with pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT task, type FROM run_events WHERE run_id = $1 AND phase = 1 "
                "AND type IN ('task.started', 'task.completed')", arg.run_id)
        started = {r["task"] for r in rows if r["type"] == "task.started"}
        done = {r["task"] for r in rows if r["type"] == "task.completed"}
        return sorted(started - done)

    try:
        in_flight = await eventually(task_running_in_phase_1, timeout=30, interval=0.02)
    except AssertionError:
        logs = worker_processes.logs()
        raise AssertionError(f"no phase-1 task started; worker log:\n{logs}") from None
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    assert first.returncode == -signal.SIGKILL

    worker_processes.start()
    try:
        result = await eventually(lambda: _result_if_done(handle), timeout=50, interval=0.2)
    except AssertionError:
        logs = worker_processes.logs()
        raise AssertionError(f"run did not finish; worker logs:\n{logs}") from None
    assert result.status == "completed"

    events = await assert_read_model_consistent(pool, arg.run_id)
    completed = [(e.phase, e.task) for e in events if e.type == "task.completed"]
    assert len(completed) == CREW_TASKS and len(set(completed)) == CREW_TASKS
    started = [(e.phase, e.task) for e in events if e.type == "task.started"]
    assert sorted(started) == sorted(completed)
    assert not [e for e in events if e.type == "task.failed"]
    assert events[-1].type == "run.completed"
    async with pool.acquire() as conn:
        snapshots = await snapshots_repo.list_snapshots(conn, arg.run_id)
        run = await runs_repo.get_run(conn, arg.run_id)
    assert len(snapshots) == len(PHASES) + 1  # one per phase and the final one; no gates
    assert run is not None and run.status == "completed"

    # The killed task really was re-run: the history shows a second attempt of it.
    retried = [e.activity_task_started_event_attributes.attempt
               for e in (await handle.fetch_history()).events
               if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
    assert max(retried) >= 2, f"no retried attempt; in flight at kill: {in_flight}"


async def _result_if_done(handle: WorkflowHandle):
    description = await handle.describe()
    if description.status is None or description.status.name == "RUNNING":
        return None
    return await handle.result()


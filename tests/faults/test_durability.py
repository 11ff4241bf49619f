"""Durability on the real dev server and Postgres: workers come and go, runs carry on.

The workflow history is the only checkpoint, so a run must survive a worker that is shut
down, one that keeps no cache at all, and one that is killed with SIGKILL in the middle of a
crew task, and the read model must come out gapless with every event written once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from tests.fault_helpers import (
    ReadModelWatcher,
    StreamFollower,
    api_settings,
    assert_snapshots_forward,
    decide_via_api,
    start_run_via_api,
    worker_env,
)
from tests.helpers import eventually, new_validation_run, wait_gate
from waystation.activities.agents import backend_named
from waystation.api.services.workflow_updates import workflow_not_ready
from waystation.kinds.validation.kind import VALIDATION
from waystation.kinds.validation.models import ValidationRunInput
from waystation.kinds.validation.phases import PHASES
from waystation.kinds.validation.workflow import ValidationRun
from waystation.persistence import events as events_repo
from waystation.persistence import runs as runs_repo
from waystation.persistence import snapshots as snapshots_repo
from waystation.testing import InProcessApi
from waystation.worker import build_worker
from waystation.workflows.gate_rules import DecisionInput

ROOT = Path(__file__).resolve().parents[2]
CREW_TASKS = sum(len(p.tasks) for p in PHASES)


async def start(client: Client, arg: ValidationRunInput, task_queue: str) -> WorkflowHandle:
    return await client.start_workflow(ValidationRun.run, arg,
                                       id=VALIDATION.workflow_id(arg.run_id),
                                       task_queue=task_queue)


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


@pytest.mark.slow
@pytest.mark.parametrize("tasks", ["activity", "in_place"])
async def test_sigkill_mid_task_then_new_worker_completes_run(
        dev_env: WorkflowEnvironment, pool, task_queue, worker_processes, cleanup_handles,
        tasks):
    """A regular activity's task is retried once its heartbeat stops; a task run in place (a
    local activity, here with a backend that takes 300 ms) once its workflow task times out:
    either way it runs again on the new worker and is written once."""
    client = dev_env.client
    arg = await new_validation_run(pool, gates=[], tasks=tasks)
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

    history = (await handle.fetch_history()).events
    if tasks == "activity":
        # The killed task really was re-run: the history shows a second attempt of it.
        retried = [e.activity_task_started_event_attributes.attempt for e in history
                   if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
        assert max(retried) >= 2, f"no retried attempt; in flight at kill: {in_flight}"
    else:
        # In place: no regular activity at all, and the killed worker's workflow task (the
        # task in flight, and any done since the last completed one) timed out and ran again.
        types = {e.event_type for e in history}
        assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in types
        assert EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT in types, \
            f"no workflow task timed out; in flight at kill: {in_flight}"


async def _result_if_done(handle: WorkflowHandle):
    description = await handle.describe()
    if description.status is None or description.status.name == "RUNNING":
        return None
    return await handle.result()


# --- 4. SIGKILL again and again through a whole run, with gates and a live stream ----------

TWO_GATES = ["approve_founders_brief", "approve_vpc_completion"]


@pytest.mark.slow
async def test_worker_sigkilled_every_few_seconds_through_a_whole_run(
        dev_env: WorkflowEnvironment, pool, migrated_url, task_queue, worker_processes,
        cleanup_handles):
    """A worker is SIGKILLed a few seconds after every bit of progress (a task completed or a
    gate opened) and replaced, from the first phase to the end; two gates are decided through
    the API, one of them while no worker is up. A browser-like SSE client follows the run,
    dropping its connection every few events and resuming with Last-Event-ID."""
    rng = random.Random(6)
    background: list[asyncio.Task] = []
    api = InProcessApi(api_settings(migrated_url, dev_env.client.service_client.config.target_host,
                                    task_queue, sse_heartbeat_seconds=1.0))
    await api.start()
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
            worker = worker_processes.start()
            run_id = await start_run_via_api(http, TWO_GATES)
            cleanup_handles.append(dev_env.client.get_workflow_handle(
                VALIDATION.workflow_id(run_id)))
            watcher = ReadModelWatcher(pool, run_id)
            background.append(watcher.start())
            follower = StreamFollower(api.url, run_id, cut_every=(3, 12))
            following = asyncio.create_task(follower.run())
            background.append(following)

            async def progress() -> tuple[int, str, str | None]:
                async with pool.acquire() as conn:
                    done = await conn.fetchval(
                        "SELECT count(*) FROM run_events WHERE run_id = $1 "
                        "AND type IN ('task.completed', 'gate.opened', 'gate.decided')", run_id)
                    run = await runs_repo.get_run(conn, run_id)
                assert run is not None
                return done, run.status, run.hitl_state

            kills, decided, statuses = [], [], []
            mark = (await progress())[0]
            while True:
                async def moved(mark: int = mark) -> tuple[int, str, str | None] | None:
                    now = await progress()
                    finished = now[1] in ("completed", "failed", "canceled")
                    undecided = now[2] is not None and now[2] not in decided
                    return now if now[0] > mark or finished or undecided else None
                try:
                    done, status, waiting_on = await eventually(moved, timeout=60, interval=0.1)
                except AssertionError:
                    raise AssertionError(
                        f"stuck after kills {kills}; "
                        f"{await _describe(dev_env.client, run_id, pool)}\nworker logs:\n"
                        f"{worker_processes.logs()}") from None
                if status in ("completed", "failed", "canceled"):
                    break
                if waiting_on is not None and waiting_on not in decided:
                    if not decided:
                        # Gate 1: the worker dies while the run waits; the decision is sent at
                        # once, while its replacement is still starting.
                        kills.append(_sigkill(worker, "waiting at a gate"))
                        worker = worker_processes.start()
                    await decide_via_api(http, run_id, waiting_on, statuses=statuses)
                    decided.append(waiting_on)
                    mark = (await progress())[0]
                    continue
                # The kill lands at a random moment of the run's work: that is the test, so
                # a random fixed time, not an event.
                await asyncio.sleep(rng.uniform(0.3, 2.0))
                kills.append(_sigkill(worker, await _doing(pool, run_id)))
                worker = worker_processes.start()
                mark = (await progress())[0]

            await asyncio.wait_for(following, timeout=30)
            await watcher.stop()
    finally:
        for task in background:
            task.cancel()
        await api.stop()

    async with pool.acquire() as conn:
        run = await runs_repo.get_run(conn, run_id)
    assert run is not None and run.status == "completed", (run, worker_processes.logs())
    print(f"{len(kills)} kills: {kills}; decision statuses {statuses}; "
          f"{follower.connections} stream connections")
    assert len(kills) >= 5, kills
    assert decided == TWO_GATES
    assert 500 not in statuses and statuses[-1] == 200, statuses

    events = await assert_read_model_consistent(pool, run_id)
    completed = [(e.phase, e.task) for e in events if e.type == "task.completed"]
    assert len(completed) == CREW_TASKS and len(set(completed)) == CREW_TASKS
    assert [e.type for e in events].count("gate.decided") == 2
    assert events[-1].type == "run.completed"
    await assert_snapshots_forward(pool, run_id)
    watcher.assert_never_backwards()
    assert watcher.samples[-1][0] == len(events)

    # The follower saw every event exactly once, in order, over many connections.
    follower.assert_each_event_once([e.seq for e in events])
    assert follower.connections >= 3, follower.connections
    assert not follower.errors, follower.errors


async def _describe(client: Client, run_id: uuid.UUID, pool: asyncpg.Pool) -> str:
    """What a stuck run is doing, for the failure message."""
    handle = client.get_workflow_handle(VALIDATION.workflow_id(run_id))
    description = await handle.describe()
    pending = [(a.activity_type.name, a.attempt, a.state, a.last_failure.message)
               for a in description.raw_description.pending_activities]
    history = [e.event_type for e in (await handle.fetch_history()).events][-15:]
    async with pool.acquire() as conn:
        events = await events_repo.list_events(conn, run_id, after_seq=0, limit=1000)
    return (f"status {description.status}; pending activities {pending}; "
            f"history tail {[EventType.Name(t) for t in history]}; "
            f"events tail {[(e.seq, e.event_key) for e in events[-6:]]}")


async def _doing(pool: asyncpg.Pool, run_id: uuid.UUID) -> str:
    """The run's newest event: what the killed worker was in the middle of (roughly)."""
    async with pool.acquire() as conn:
        return await conn.fetchval("SELECT event_key FROM run_events WHERE run_id = $1 "
                                   "ORDER BY seq DESC LIMIT 1", run_id)


def _sigkill(proc: subprocess.Popen, when: str) -> str:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    return when


# --- 5. every worker stopped while many runs wait at a gate --------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("runs", [1000])
async def test_workers_stopped_while_many_runs_wait_then_every_run_resumes(
        dev_env: WorkflowEnvironment, pool, migrated_url, task_queue, tmp_path, runs):
    """N runs park at their first gate; the only worker is stopped; a fresh worker (empty
    cache) takes every decision: each run replays its history without a non-determinism
    error, records the decision, runs the next phase's first crew task, and writes nothing
    twice."""
    client = dev_env.client
    workers = WorkerProcesses(worker_env(migrated_url, client.service_client.config.target_host,
                                         task_queue, tmp_path / "data"), tmp_path)
    at_most = asyncio.Semaphore(50)
    handles: list[WorkflowHandle] = []

    async def terminated(handle: WorkflowHandle) -> None:
        async with at_most:
            with contextlib.suppress(Exception):
                await handle.terminate("test done")
    try:
        first = workers.start()
        args = [await new_validation_run(pool, gates=TWO_GATES) for _ in range(runs)]
        ids = [a.run_id for a in args]

        async def started(arg: ValidationRunInput) -> WorkflowHandle:
            async with at_most:
                return await start(client, arg, task_queue)
        handles = await asyncio.gather(*(started(a) for a in args))
        await _all_waiting(pool, ids, "approve_founders_brief", timeout=30 + runs * 0.12,
                           workers=workers)
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=30) == 0
        before = await _event_keys(pool, ids)
        # Nothing runs anywhere for a while, as between a stop and a deploy: the gap is the
        # fault being simulated, not a wait for something to happen.
        await asyncio.sleep(2)

        workers.start()

        not_ready = 0

        async def decided(handle: WorkflowHandle) -> str:
            """As the API's client would: a 503 (the run's workflow task is being retried,
            e.g. it went to the stopped worker's sticky queue) means send it again."""
            async def taken() -> str | None:
                nonlocal not_ready
                try:
                    return (await decide(handle, "approve_founders_brief")).status
                except RPCError as error:
                    if not workflow_not_ready(error):
                        raise
                    not_ready += 1
                    return None
            async with at_most:
                try:
                    status: str = await eventually(taken, timeout=60, interval=1)
                except AssertionError:
                    raise AssertionError(f"{handle.id} never took its decision") from None
                return status
        assert set(await asyncio.gather(*(decided(h) for h in handles))) == {"approved"}
        # Resumed: each run replayed its history, recorded the decision and ran the first
        # crew task of the next phase (the rest of the phase is of no interest here).
        await _all_have(pool, ids, f"p1.a1.{PHASES[1].tasks[0].task}:completed",
                        timeout=30 + runs * 0.08, workers=workers)
        for handle in random.Random(5).sample(handles, 10):  # before they are terminated
            failed = [e for e in (await handle.fetch_history()).events
                      if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]
            assert failed == [], failed[0].workflow_task_failed_event_attributes
        await asyncio.gather(*(terminated(h) for h in handles))

        after = await _event_keys(pool, ids)
        async with pool.acquire() as conn:
            broken = await conn.fetch(
                "SELECT r.id, r.last_seq, count(e.*) AS n, min(e.seq) AS lo, max(e.seq) AS hi, "
                "count(DISTINCT e.event_key) AS keys FROM runs r JOIN run_events e "
                "ON e.run_id = r.id WHERE r.id = ANY($1::uuid[]) GROUP BY r.id "
                "HAVING NOT (count(*) = r.last_seq AND min(e.seq) = 1 AND max(e.seq) = r.last_seq "
                "AND count(DISTINCT e.event_key) = count(*))", ids)
            decisions = await conn.fetchval(
                "SELECT count(*) FROM run_events WHERE run_id = ANY($1::uuid[]) "
                "AND type = 'gate.decided'", ids)
        assert broken == [], [dict(b) for b in broken[:5]]
        assert decisions == runs
        for run_id in ids:  # what was written before the stop is untouched, in order
            assert after[run_id][: len(before[run_id])] == before[run_id]
            assert any(k.startswith("gate.") and k.endswith(".decided")
                       for k in after[run_id][len(before[run_id]):])
        assert "nondetermin" not in workers.logs().lower()
        print(f"{runs} runs decided after the worker swap; {not_ready} updates refused as "
              "'workflow task in failed state' and sent again")
    finally:
        workers.stop_all()
        await asyncio.gather(*(terminated(h) for h in handles))


async def _all_waiting(pool: asyncpg.Pool, ids: list[uuid.UUID], checkpoint: str, *,
                       timeout: float, workers: WorkerProcesses) -> None:  # noqa: ASYNC109
    async def count() -> bool:
        async with pool.acquire() as conn:
            return await conn.fetchval(
                "SELECT count(*) FROM runs WHERE id = ANY($1::uuid[]) AND hitl_state = $2",
                ids, checkpoint) == len(ids)
    try:
        await eventually(count, timeout=timeout, interval=0.25)
    except AssertionError:
        raise AssertionError(f"not every run reached {checkpoint}; worker logs:\n"
                             f"{workers.logs()}") from None


async def _all_have(pool: asyncpg.Pool, ids: list[uuid.UUID], event_key: str, *,
                    timeout: float, workers: WorkerProcesses) -> None:  # noqa: ASYNC109
    async def count() -> bool:
        async with pool.acquire() as conn:
            return await conn.fetchval(
                "SELECT count(*) FROM run_events WHERE run_id = ANY($1::uuid[]) "
                "AND event_key = $2", ids, event_key) == len(ids)
    try:
        await eventually(count, timeout=timeout, interval=0.25)
    except AssertionError:
        raise AssertionError(f"not every run wrote {event_key}; worker logs:\n"
                             f"{workers.logs()}") from None


async def _event_keys(pool: asyncpg.Pool, ids: list[uuid.UUID]) -> dict[uuid.UUID, list[str]]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT run_id, event_key FROM run_events "
                                "WHERE run_id = ANY($1::uuid[]) ORDER BY run_id, seq", ids)
    keys: dict[uuid.UUID, list[str]] = {run_id: [] for run_id in ids}
    for row in rows:
        keys[row["run_id"]].append(row["event_key"])
    return keys

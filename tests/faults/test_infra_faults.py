"""The servers under Waystation fail while runs are under way: the Temporal dev server is
restarted on its SQLite file, PostgreSQL is restarted, and the API's listening connection is
killed. Runs finish, the read model stays gapless with one row per event key, and a client
following a run sees every event once.

Each test brings its own server to break (a dev server on a file of its own, an embedded
PostgreSQL in a folder of its own), so the session's shared servers are never disturbed.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from tests.fault_helpers import (
    EmbeddedPostgres,
    ReadModelWatcher,
    StreamFollower,
    TemporalDevServer,
    api_settings,
    assert_snapshots_forward,
    auth,
    decide_via_api,
    start_run_via_api,
    worker_env,
)
from tests.faults.test_durability import CREW_TASKS, WorkerProcesses, assert_read_model_consistent
from tests.helpers import IDEA, eventually
from waystation.kinds.validation.kind import VALIDATION
from waystation.persistence import runs as runs_repo
from waystation.persistence.db import create_pool
from waystation.persistence.migrate import apply_migrations
from waystation.registry import load_registry
from waystation.testing import InProcessApi

FINAL = ("completed", "failed", "canceled")


async def run_row(pool: asyncpg.Pool, run_id: uuid.UUID):  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn:
        return await runs_repo.get_run(conn, run_id)


async def until_status(pool: asyncpg.Pool, run_id: uuid.UUID, *, timeout: float = 60,  # noqa: ASYNC109
                       waiting_on: str | None = None, final: bool = False) -> None:
    async def reached() -> bool:
        run = await run_row(pool, run_id)
        if run is None:
            return False
        if final:
            return run.status in FINAL
        return run.hitl_state == waiting_on
    await eventually(reached, timeout=timeout, interval=0.1)


async def task_in_flight(pool: asyncpg.Pool, run_id: uuid.UUID, phase: int) -> bool:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT task, type FROM run_events WHERE run_id = $1 "
                                "AND phase = $2 AND type IN ('task.started', 'task.completed')",
                                run_id, phase)
    started = {r["task"] for r in rows if r["type"] == "task.started"}
    return bool(started - {r["task"] for r in rows if r["type"] == "task.completed"})


async def activity_attempts(client: Client, run_id: uuid.UUID) -> int:
    history = await client.get_workflow_handle(VALIDATION.workflow_id(run_id)).fetch_history()
    return max(e.activity_task_started_event_attributes.attempt for e in history.events
               if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED)


# --- 1. the Temporal dev server restarted mid-run ------------------------------------------

@pytest.fixture
def temporal_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="ws-temporal-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
async def test_temporal_restarted_mid_run_api_says_503_then_runs_carry_on(
        pool, migrated_url, temporal_dir, tmp_path):
    server = TemporalDevServer(temporal_dir)
    await server.start()
    task_queue = f"tq-{uuid.uuid4()}"
    workers = WorkerProcesses(worker_env(migrated_url, server.address, task_queue,
                                         tmp_path / "data", delay_ms=300), tmp_path)
    api = InProcessApi(api_settings(migrated_url, server.address, task_queue,
                                    sse_heartbeat_seconds=1.0))
    workers.start()
    await api.start()
    background: list[asyncio.Task] = []
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=60) as http:
            # B waits at its first gate through the outage; A is in the middle of phase 1.
            run_b = await start_run_via_api(http, ["approve_founders_brief",
                                                   "approve_vpc_completion"])
            run_a = await start_run_via_api(http, ["approve_founders_brief"])
            follower = StreamFollower(api.url, run_a)
            following = asyncio.create_task(follower.run())
            background.append(following)
            watcher = ReadModelWatcher(pool, run_a)
            background.append(watcher.start())
            await until_status(pool, run_a, waiting_on="approve_founders_brief")
            await until_status(pool, run_b, waiting_on="approve_founders_brief")
            await decide_via_api(http, run_a, "approve_founders_brief", statuses=[])
            await eventually(lambda: task_in_flight(pool, run_a, 1), timeout=30)

            server.stop()
            down_at = time.monotonic()
            timings: dict[str, float] = {}

            async def timed(name: str, call) -> httpx.Response:  # type: ignore[no-untyped-def]
                began = time.monotonic()
                response = await call
                timings[name] = time.monotonic() - began
                return response

            body = {"kind": "validation", "input": {"entrepreneur_input": IDEA}}
            keyed = {**auth(), "Idempotency-Key": f"outage-{uuid.uuid4()}"}
            calls = {
                "POST /runs": http.post("/runs", headers=keyed, json=body),
                "POST decision": http.post(f"/runs/{run_b}/decisions/approve_founders_brief",
                                           headers=auth(), json={"decision": "approve"}),
                "POST cancel": http.post(f"/runs/{run_b}/cancel", headers=auth()),
                "GET /healthz": http.get("/healthz"),
            }
            answers = await asyncio.gather(*(timed(name, call) for name, call in calls.items()))
            refused = dict(zip(calls, answers, strict=True))
            for name, response in refused.items():
                assert response.status_code == 503, (name, response.status_code, response.text)
                assert int(response.headers["Retry-After"]) > 0, name
                if name != "GET /healthz":
                    assert response.json()["error"]["code"] == "unavailable", name
            assert max(timings.values()) < 30, timings
            # Postgres-backed reads answer as usual.
            for path in (f"/runs/{run_a}", f"/runs/{run_a}/events",
                         f"/runs/{run_a}/snapshots/latest", f"/runs/{run_b}/decisions",
                         "/decisions", "/runs"):
                response = await http.get(path, headers=auth())
                assert response.status_code == 200, (path, response.text)
            assert (await run_row(pool, run_b)).hitl_state == "approve_founders_brief"
            outage = time.monotonic() - down_at

            await server.start()
            # The run A was in the middle of finishes; B takes its decision and moves on; the
            # refused start, sent again with its key, starts the run it recorded.
            await decide_via_api(http, run_b, "approve_founders_brief", statuses=[])
            retried = await http.post("/runs", headers=keyed, json=body)
            assert retried.status_code == 201, retried.text
            run_c = uuid.UUID(retried.json()["run_id"])
            await until_status(pool, run_a, final=True, timeout=90)
            await until_status(pool, run_b, waiting_on="approve_vpc_completion", timeout=60)
            await until_status(pool, run_c, waiting_on="approve_founders_brief", timeout=60)
            await asyncio.wait_for(following, timeout=30)
            await watcher.stop()
        client = await server.connect()
        for run_id in (run_b, run_c):
            await client.get_workflow_handle(VALIDATION.workflow_id(run_id)).terminate("done")
    finally:
        for task in background:
            task.cancel()
        await api.stop()
        workers.stop_all()
        server.stop()

    run = await run_row(pool, run_a)
    assert run is not None and run.status == "completed", (run, workers.logs(), server.logs())
    events = await assert_read_model_consistent(pool, run_a)
    completed = [(e.phase, e.task) for e in events if e.type == "task.completed"]
    assert len(completed) == CREW_TASKS and len(set(completed)) == CREW_TASKS
    await assert_snapshots_forward(pool, run_a)
    watcher.assert_never_backwards()
    follower.assert_each_event_once([e.seq for e in events])
    await assert_read_model_consistent(pool, run_b)
    print(f"Temporal down {outage:.1f}s; 503 answered in {timings}")


# --- 2. PostgreSQL restarted, and the API's listening connection killed ---------------------

@pytest_asyncio.fixture
async def private_postgres() -> AsyncIterator[tuple[EmbeddedPostgres, str]]:
    # Short path: the server's unix socket lives in pgdata (socket paths max out at ~107 bytes).
    folder = Path(tempfile.mkdtemp(prefix="ws-pg-"))
    server = EmbeddedPostgres(folder / "pgdata")
    url = await asyncio.to_thread(server.start)
    conn = await asyncpg.connect(url)
    try:
        await apply_migrations(conn, folders=load_registry(
            use_entry_points=False).migration_folders())
    finally:
        await conn.close()
    try:
        yield server, url
    finally:
        await asyncio.to_thread(server.destroy)
        shutil.rmtree(folder, ignore_errors=True)


async def listener_pids(pool: asyncpg.Pool) -> list[int]:
    """Backends whose last statement was a LISTEN: the API's event hub connection."""
    async with pool.acquire() as conn:
        return [r["pid"] for r in await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN%' "
            "AND pid <> pg_backend_pid()")]


@pytest.mark.slow
async def test_postgres_restarted_under_activities_and_streams_then_listener_killed(
        dev_env: WorkflowEnvironment, private_postgres, tmp_path):
    server, url = private_postgres
    task_queue = f"tq-{uuid.uuid4()}"
    address = dev_env.client.service_client.config.target_host
    workers = WorkerProcesses(worker_env(url, address, task_queue, tmp_path / "data",
                                         delay_ms=600), tmp_path)
    # Heartbeats far apart: a stream that recovers does so through the listener, not by
    # polling the table on its heartbeat. The workers' delay too, as a deployment's API and
    # workers share settings: the runs' tasks are regular activities, whose attempts show.
    api = InProcessApi(api_settings(url, address, task_queue, sse_heartbeat_seconds=30.0,
                                    offline_delay_ms=600))
    pool = await create_pool(url, max_size=4)
    try:
        await _postgres_faults(dev_env.client, server, pool, api, workers, tmp_path)
    finally:
        await pool.close()


async def _postgres_faults(client: Client, server: EmbeddedPostgres, pool: asyncpg.Pool,
                           api: InProcessApi, workers: WorkerProcesses, log_dir: Path) -> None:
    workers.start()
    await api.start()
    background: list[asyncio.Task] = []
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
            # --- the restart, in the middle of a crew task, with a stream open
            run_a = await start_run_via_api(http, [])
            follower = StreamFollower(api.url, run_a)
            following = asyncio.create_task(follower.run())
            background.append(following)
            await eventually(lambda: task_in_flight(pool, run_a, 1), timeout=30)
            await eventually(lambda: asyncio.sleep(0, len(follower.events) > 5), timeout=10)
            # A second client reads a few events, then goes away just as the database does.
            early = StreamFollower(api.url, run_a, cut_every=(4, 4))
            await early._connect_once(http)
            await asyncio.to_thread(server.stop)
            # Down for a while, as a restart or failover would be: the client comes back
            # meanwhile and is told to retry later (never a 500); reads are 503 too.
            outage = {}
            for path in (f"/runs/{run_a}", f"/runs/{run_a}/events"):
                outage[path] = await http.get(path, headers=auth())
            # The outage lasts this long whatever the client does (the fault under test),
            # and the client retries at a fixed pace, as EventSource does.
            for _ in range(3):
                await early._connect_once(http)
                await asyncio.sleep(0.5)
            await asyncio.sleep(1)
            await asyncio.to_thread(server.start)
            late = early.statuses[1:]
            while not early.ended:  # and resumes from its Last-Event-ID once it is back
                await early._connect_once(http)
                await asyncio.sleep(0.2)  # EventSource's reconnection delay, as above
            await until_status(pool, run_a, final=True, timeout=90)
            await asyncio.wait_for(following, timeout=30)
            for path, response in outage.items():
                assert response.status_code == 503, (path, response.status_code, response.text)
                assert response.headers.get("Retry-After"), path
            assert late[:3] == [503, 503, 503], early.statuses

            # --- the listening connection killed: live delivery resumes within seconds
            old = await listener_pids(pool)
            assert len(old) == 1, old
            run_b = await start_run_via_api(http, [])
            follower_b = StreamFollower(api.url, run_b)
            following_b = asyncio.create_task(follower_b.run())
            background.append(following_b)
            await eventually(lambda: asyncio.sleep(0, len(follower_b.events) > 3), timeout=30)
            async with pool.acquire() as conn:
                assert await conn.fetchval("SELECT pg_terminate_backend($1)", old[0])
                killed_at_seq = await conn.fetchval(
                    "SELECT last_seq FROM runs WHERE id = $1", run_b)
            killed_at = time.monotonic()
            await eventually(lambda: asyncio.sleep(0, bool(follower_b.seqs) and
                                                   follower_b.seqs[-1] > killed_at_seq + 2),
                             timeout=10, interval=0.02)
            recovered_in = time.monotonic() - killed_at
            new = await eventually(lambda: listener_pids(pool), timeout=5)
            assert new != old
            await until_status(pool, run_b, final=True, timeout=60)
            await asyncio.wait_for(following_b, timeout=30)
    finally:
        for task in background:
            task.cancel()
        await api.stop()
        workers.stop_all()

    for run_id, seen in ((run_a, follower), (run_a, early), (run_b, follower_b)):
        run = await run_row(pool, run_id)
        assert run is not None and run.status == "completed", (run.error_message if run else
                                                               None, workers.logs())
        events = await assert_read_model_consistent(pool, run_id)
        completed = [(e.phase, e.task) for e in events if e.type == "task.completed"]
        assert len(completed) == CREW_TASKS and len(set(completed)) == CREW_TASKS
        assert not [e for e in events if e.type == "task.failed"]
        await assert_snapshots_forward(pool, run_id)
        seen.assert_each_event_once([e.seq for e in events])
    # The crew task running when the database went away waited it out and carried on: its
    # writes were retried, no attempt failed, and no `task.failed` was recorded.
    assert "database unavailable" in _read_logs(log_dir)
    attempts_a = await activity_attempts(client, run_a)
    assert recovered_in < 5, recovered_in
    print(f"run A: {follower.connections} stream connections, statuses {follower.statuses}; "
          f"resuming client: statuses {early.statuses}; "
          f"activity attempts up to {attempts_a}; listener killed: next events after "
          f"{recovered_in:.2f}s")


def _read_logs(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("worker-*.log")))


# --- 3. a request the database drops mid-way -------------------------------------------------

async def test_database_going_away_mid_request_is_503_never_500():
    """Shutting down, starting up, a connection closed under a query: 503 and Retry-After,
    like Temporal being down; any other error stays a 500."""
    from asyncpg.exceptions import (
        AdminShutdownError,
        CannotConnectNowError,
        ConnectionDoesNotExistError,
    )
    from fastapi import FastAPI

    from waystation.api.errors import install_error_handlers

    errors = {"shutdown": AdminShutdownError, "starting": CannotConnectNowError,
              "closed": ConnectionDoesNotExistError, "refused": ConnectionRefusedError,
              "bug": ValueError}
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/boom/{kind}")
    async def boom(kind: str) -> None:
        raise errors[kind]("boom")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        for kind in errors:
            response = await http.get(f"/boom/{kind}")
            if kind == "bug":
                assert response.status_code == 500
                continue
            assert response.status_code == 503, (kind, response.text)
            assert response.headers["Retry-After"] == "5"
            assert response.json()["error"]["code"] == "unavailable"


async def test_decision_refused_while_workflow_task_is_retried_is_503_not_409():
    """After a worker dies holding a run's workflow task (or the task times out), Temporal
    refuses updates for a moment with FAILED_PRECONDITION + WorkflowNotReadyFailure. The run is
    alive: the caller hears 503 and Retry-After, not 409 "no longer running"."""
    from types import SimpleNamespace

    from google.protobuf.any_pb2 import Any as AnyProto
    from temporalio.api.common.v1 import GrpcStatus
    from temporalio.service import RPCError, RPCStatusCode

    from waystation.api.errors import ApiError
    from waystation.api.services.workflow_updates import execute_update

    def refusal(*details: str) -> RPCError:
        status = GrpcStatus(code=9, message="Workflow Task in failed state", details=[
            AnyProto(type_url=f"type.googleapis.com/temporal.api.errordetails.v1.{d}")
            for d in details])
        return RPCError(status.message, RPCStatusCode.FAILED_PRECONDITION,
                        status.SerializeToString())

    async def refused_with(error: RPCError) -> ApiError:
        async def execute(*_args: object, **_kwargs: object) -> None:
            raise error
        handle = SimpleNamespace(execute_update=execute)
        temporal = SimpleNamespace(get_workflow_handle=lambda _id: handle)
        with pytest.raises(ApiError) as caught:
            await execute_update(temporal, "validation-x", None, None, what="the decision",
                                 ended=ApiError(409, "not_pending", "no longer running"))
        return caught.value

    not_ready = await refused_with(refusal("WorkflowNotReadyFailure"))
    assert (not_ready.status, not_ready.code) == (503, "unavailable")
    assert not_ready.headers == {"Retry-After": "5"}
    finished = await refused_with(refusal())
    assert (finished.status, finished.code) == (409, "not_pending")

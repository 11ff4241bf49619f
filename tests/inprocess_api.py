"""An in-process API with a worker of every installed kind on the session's dev server, and
its callers' tokens: the one `settings` and `api` fixtures of the tests that start runs through
the API and follow them. tests/integration/conftest.py hands them to every integration test
(a module that needs another worker or settings defines its own, taking these by name), and
the mobile kind's conftest (kinds/mobile/tests) to its tests; the helpers below are imported."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from tests.helpers import IDEA, eventually
from waystation.activities.agents import backend_named
from waystation.api.app import create_app
from waystation.api.auth import issue_token
from waystation.settings import Settings
from waystation.worker import build_worker

SECRET = "test-secret-0123456789-0123456789-abcdef"


@pytest.fixture
def settings(migrated_url: str, dev_env, task_queue: str, tmp_path: Path) -> Settings:
    return Settings(database_url=migrated_url, jwt_secret=SECRET, temporal_task_queue=task_queue,
                    temporal_address=dev_env.client.service_client.config.target_host,
                    artifact_dir=tmp_path / "artifacts")


@pytest_asyncio.fixture
async def api(settings: Settings, dev_env, pool) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    worker = build_worker(dev_env.client, pool, task_queue=settings.temporal_task_queue,
                          backend=backend_named("offline"), artifact_dir=settings.artifact_path)
    async with app.router.lifespan_context(app), worker:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield client


def auth(user: str = "alice", role: str = "user") -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(SECRET, user, role)}"}  # type: ignore[arg-type]


async def start_run(api: httpx.AsyncClient, user: str = "alice", **input_fields) -> str:
    """A validation run of `user`'s; returns its id."""
    body = {"kind": "validation", "input": {"entrepreneur_input": IDEA, **input_fields}}
    response = await api.post("/runs", json=body, headers=auth(user))
    assert response.status_code == 201, response.text
    return response.json()["run_id"]


async def wait_pending(api: httpx.AsyncClient, run_id: str, checkpoint: str,
                       user: str = "alice") -> dict:
    async def check():
        run = (await api.get(f"/runs/{run_id}", headers=auth(user))).json()
        return run if run["pending_checkpoint"] == checkpoint else None
    return await eventually(check)


async def finished(api: httpx.AsyncClient, run_id: str, user: str = "alice") -> dict:
    async def check():
        run = (await api.get(f"/runs/{run_id}", headers=auth(user))).json()
        return run if run["status"] in ("completed", "failed", "canceled") else None
    return await eventually(check, timeout=60)

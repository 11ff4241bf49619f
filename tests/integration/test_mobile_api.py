"""Mobile runs and the screen-graph API end to end: dev server, real Postgres, a worker."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from tests.helpers import eventually
from tests.mobile_helpers import NOTES
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


async def finished(api: httpx.AsyncClient, run_id: str, user: str = "alice") -> dict:
    async def check():
        run = (await api.get(f"/runs/{run_id}", headers=auth(user))).json()
        return run if run["status"] in ("completed", "failed", "canceled") else None
    return await eventually(check, timeout=60)


async def test_mobile_run_graph_in_every_format(api):
    body = {"kind": "mobile_agent", "input": {"app_package": NOTES, "driver": "simulator",
                                              "max_steps": 60, "sensitive_actions": "skip"}}
    response = await api.post("/runs", json=body, headers=auth())
    assert response.status_code == 201, response.text
    run_id = response.json()["run_id"]
    assert response.json()["workflow_id"] == f"mobile-{run_id}"
    run = await finished(api, run_id)
    assert run["status"] == "completed" and run["result"]["stop_reason"] == "max_steps"

    graph = (await api.get(f"/runs/{run_id}/graph", headers=auth())).json()
    assert graph["run_id"] == run_id and len(graph["screens"]) >= 5 and graph["edges"]
    assert {e["from"] for e in graph["edges"]} <= {s["id"] for s in graph["screens"]}
    dot = await api.get(f"/runs/{run_id}/graph?format=dot", headers=auth())
    assert dot.status_code == 200 and dot.text.startswith("digraph") and "cluster_" in dot.text
    mermaid = await api.get(f"/runs/{run_id}/graph?format=mermaid", headers=auth())
    assert mermaid.text.startswith("flowchart LR") and "-->" in mermaid.text
    page = await api.get(f"/runs/{run_id}/graph?format=html", headers=auth())
    assert page.headers["content-type"].startswith("text/html")
    assert "<svg" in page.text and "data:image/png;base64," in page.text
    utg = await api.get(f"/apps/{NOTES}/graph?format=utg", headers=auth())
    assert utg.text.startswith("var utg =")

    # Another user (one with no run of the app) may see neither the run nor the app's graph
    # and coverage it produced, nor its artifacts.
    stranger = f"stranger-{uuid.uuid4().hex[:8]}"
    for path in (f"/runs/{run_id}/graph", f"/apps/{NOTES}/graph", f"/apps/{NOTES}/coverage"):
        assert (await api.get(path, headers=auth(stranger))).status_code == 404, path
    app_graph = (await api.get(f"/apps/{NOTES}/graph", headers=auth())).json()
    assert len(app_graph["screens"]) >= len(graph["screens"])
    coverage = (await api.get(f"/apps/{NOTES}/coverage", headers=auth("ops", "service"))).json()
    assert coverage["screens"] == len(app_graph["screens"])
    assert 0 < coverage["activity_coverage"] <= 1
    assert coverage["actions_tried"] <= coverage["actions_discovered"]
    assert run_id in coverage["new_screens_per_100_steps"]
    assert (await api.get(f"/apps/{NOTES}/coverage")).status_code == 401
    assert (await api.get("/apps/com.example.none/graph", headers=auth())).status_code == 404

    artifacts = (await api.get(f"/runs/{run_id}/artifacts?step=1", headers=auth())).json()
    shot = next(a for a in artifacts["artifacts"] if a["kind"] == "screenshot")
    download = await api.get(shot["url"].removeprefix("http://localhost"), headers=auth())
    assert download.status_code == 200 and download.content.startswith(b"\x89PNG")
    refused = await api.get(shot["url"].removeprefix("http://localhost"), headers=auth(stranger))
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "artifact_not_found"

    events = (await api.get(f"/runs/{run_id}/events?limit=1000", headers=auth())).json()
    types = [e["type"] for e in events["events"]]
    assert types[0] == "run.started" and "run.completed" in types


async def test_mobile_run_input_is_validated(api):
    body = {"kind": "mobile_agent", "input": {"app_package": "not a package"}}
    response = await api.post("/runs", json=body, headers=auth())
    assert response.status_code == 422

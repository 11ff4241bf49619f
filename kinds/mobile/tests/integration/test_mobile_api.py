"""Mobile runs and the screen-graph API end to end: dev server, real Postgres, a worker."""

from __future__ import annotations

import uuid

from mobile_helpers import NOTES

from tests.inprocess_api import auth, finished


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

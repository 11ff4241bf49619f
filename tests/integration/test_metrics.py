"""Metrics: the API's /metrics after a run (HTTP, streams, the read model's figures) and a
worker's Temporal runtime endpoint with the model counters."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from tests.agent_helpers import new_agent_run, start_agent, waiting
from tests.fault_helpers import api_settings, auth, worker_env
from tests.faults.test_durability import WorkerProcesses
from tests.helpers import IDEA, eventually, new_validation_run
from tests.sse_client import sse_events
from waystation.activities.agents import backend_named
from waystation.kinds.validation.kind import VALIDATION
from waystation.kinds.validation.workflow import ValidationRun
from waystation.testing import InProcessApi, free_port
from waystation.worker import build_worker

Samples = dict[tuple[str, frozenset], float]


def parse(text: str) -> Samples:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest_asyncio.fixture
async def served(dev_env, pool, migrated_url, task_queue) -> AsyncIterator[InProcessApi]:
    address = dev_env.client.service_client.config.target_host
    # Fresh figures at every scrape: the test compares them before and after.
    api = InProcessApi(api_settings(migrated_url, address, task_queue, metrics_cache_seconds=0))
    worker = build_worker(dev_env.client, pool, task_queue=task_queue,
                          backend=backend_named("offline"))
    async with worker:
        await api.start()
        try:
            yield api
        finally:
            await api.stop()


async def scrape(http: httpx.AsyncClient) -> Samples:
    response = await http.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


async def test_api_metrics_after_a_run_and_a_batch_job(served, pool):
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        before = await scrape(http)
        refused = await http.post("/runs", headers={**auth(), "Content-Type": "text/plain"},
                                  content=b"x")
        assert refused.status_code == 415, refused.text
        response = await http.post("/runs", headers=auth(), json={"kind": "validation", "input": {
            "entrepreneur_input": IDEA, "gates": ["approve_founders_brief"]}})
        assert response.status_code == 201, response.text
        run_id = response.json()["run_id"]

        async def pending() -> bool:
            run = (await http.get(f"/runs/{run_id}", headers=auth())).json()
            return run["pending_checkpoint"] == "approve_founders_brief"
        await eventually(pending, timeout=30)

        first_event = asyncio.Event()

        async def follow() -> None:
            async with http.stream("GET", f"/runs/{run_id}/events/stream",
                                   headers=auth()) as stream:
                async for event in sse_events(stream):
                    first_event.set()
                    if event.event == "end":
                        return
        following = asyncio.create_task(follow())
        await asyncio.wait_for(first_event.wait(), 10)

        waiting = await scrape(http)
        assert value(waiting, "waystation_read_model_up") == 1
        assert value(waiting, "waystation_sse_open_streams", stream="run") == 1
        assert value(waiting, "waystation_gates_pending", kind="validation") >= 1
        assert value(waiting, "waystation_gates_oldest_pending_age_seconds",
                     kind="validation") > 0
        assert value(waiting, "waystation_http_requests_total", method="POST", route="/runs",
                     status="201") == 1
        assert value(waiting, "waystation_http_request_duration_seconds_count", method="GET",
                     route="/runs/{run_id}") >= 1

        decided = await http.post(f"/runs/{run_id}/decisions/approve_founders_brief",
                                  headers=auth(), json={"decision": "approve"})
        assert decided.status_code == 200, decided.text
        await asyncio.wait_for(following, 60)  # the stream ends when the run does

        batch = await http.post("/runs", headers=auth(), json={"kind": "batch", "input": {
            "name": "metrics", "items": [{"text": f"item {i}"} for i in range(3)],
            "steps": [{"name": "summarize", "template": "Summarize: {{ item.text }}"}]}})
        assert batch.status_code == 201, batch.text

        async def job_done() -> bool:
            job = (await http.get(f"/jobs/{batch.json()['run_id']}", headers=auth())).json()
            return job.get("status") == "completed"
        await eventually(job_done, timeout=60)
        after = await scrape(http)
    async with pool.acquire() as conn:
        last_seq = await conn.fetchval("SELECT last_seq FROM runs WHERE id = $1",
                                       uuid.UUID(run_id))

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("waystation_runs", kind="validation", status="completed") >= 1
    assert grew("waystation_events_appended_total", kind="validation") >= last_seq > 0
    assert grew("waystation_decision_latency_seconds_count", kind="validation") >= 1
    assert grew("waystation_decision_latency_seconds_bucket", kind="validation",
                le="+Inf") >= 1
    assert grew("waystation_batch_items", status="completed") >= 3
    assert value(after, "waystation_sse_open_streams", stream="run") == 0
    assert value(after, "waystation_sse_overflows_total") == 0
    assert value(after, "waystation_http_requests_total", method="POST",
                 route="/runs/{run_id}/decisions/{checkpoint_name}", status="200") == 1
    assert value(after, "waystation_http_requests_total", method="POST", route="/runs",
                 status="415") == 1  # refused before routing, labelled by its route all the same
    assert value(after, "process_resident_memory_bytes") > 0


async def test_worker_serves_temporal_and_model_metrics(dev_env, pool, migrated_url,
                                                        task_queue, tmp_path):
    port = free_port()
    env = worker_env(migrated_url, dev_env.client.service_client.config.target_host,
                     task_queue, tmp_path / "data")
    workers = WorkerProcesses({**env, "WAYSTATION_WORKER_METRICS_PORT": str(port)}, tmp_path)
    workers.start()
    try:
        run = await new_validation_run(pool, gates=[])
        await dev_env.client.execute_workflow(
            ValidationRun.run, run, id=VALIDATION.workflow_id(run.run_id), task_queue=task_queue,
            execution_timeout=timedelta(seconds=60))
        # An agent run's model requests (the planner's offline model) are counted too.
        agent = await start_agent(dev_env.client, await new_agent_run(pool, message="A venue"),
                                  task_queue)
        await waiting(agent, turn=1)
        await agent.terminate("done")

        async def metrics() -> Samples | None:
            try:
                async with httpx.AsyncClient(timeout=2) as http:
                    text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
            except httpx.HTTPError:
                return None
            samples = parse(text)
            done = [v for (name, _), v in samples.items()
                    if name == "temporal_workflow_completed_total"]
            return samples if done and sum(done) >= 1 else None
        samples = await eventually(metrics, timeout=30, interval=0.5)
    finally:
        workers.stop_all()
    names = {name for name, _ in samples}
    assert "temporal_activity_execution_latency_count" in names, sorted(names)
    assert "temporal_worker_task_slots_available" in names, sorted(names)
    calls = sum(v for (name, labels), v in samples.items()
                if name == "waystation_model_calls_total"
                and ("backend", "offline") in labels and ("outcome", "ok") in labels)
    assert calls >= 1, [k for k in samples if k[0].startswith("waystation")]
    agent_calls = sum(v for (name, labels), v in samples.items()
                      if name == "waystation_model_calls_total"
                      and ("backend", "agent") in labels and ("outcome", "ok") in labels)
    assert agent_calls >= 3  # the turn's two model requests and its summary request
    tokens = sum(v for (name, _), v in samples.items() if name == "waystation_model_tokens_total")
    assert tokens > 0


def test_dashboard_queries_only_metrics_waystation_exports():
    root = Path(__file__).resolve().parents[2]
    dashboard = json.loads((root / "deploy/grafana/waystation.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    sources = "".join((root / f).read_text() for f in ("api/metrics.py",
                                                       "activities/agents/metered.py",
                                                       "kinds/batch/kind.py"))
    used = {re.sub(r"_(total|bucket|count|sum)$", "", name)
            for e in exprs for name in re.findall(r"\bwaystation_[a-z_]+", e)}
    assert used and all(f'"{name}"' in sources for name in used), used

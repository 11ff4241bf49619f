"""`waystation.testing.local_stack(processes=True)`: the API and the worker as the child
processes `waystation up` runs (what bench.bench_human measures), given the stack's settings
through their environment."""

from __future__ import annotations

import pytest

from tests.helpers import IDEA
from waystation.testing import eventually, local_stack

GATE = "approve_founders_brief"


@pytest.mark.slow
async def test_a_run_goes_through_a_stack_of_child_processes():
    async with local_stack(processes=True, backend="noop") as stack, \
            stack.client("alice") as http:
        started = await http.post("/runs", json={"kind": "validation", "input": {
            "entrepreneur_input": IDEA, "gates": [GATE]}})
        assert started.status_code == 201, started.text
        run_id = started.json()["run_id"]

        async def waiting() -> bool:
            return (await http.get(f"/runs/{run_id}")).json()["status"] == "paused"
        await eventually(waiting, timeout=60)
        # The settings reached the children: the API signs with the stack's secret (the
        # client's token verified), and the worker's task queue is the stack's.
        decided = await http.post(f"/runs/{run_id}/decisions/{GATE}",
                                  json={"decision": "approve"})
        assert decided.status_code == 200, decided.text

        async def finished() -> str | None:
            status = (await http.get(f"/runs/{run_id}")).json()["status"]
            return status if status in ("completed", "failed") else None
        assert await eventually(finished, timeout=60) == "completed"
        handle = stack.temporal.get_workflow_handle(started.json()["workflow_id"])
        assert (await handle.describe()).task_queue == stack.settings.temporal_task_queue

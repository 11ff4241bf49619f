"""SIGTERM to `waystation worker` lets the activity it is running finish (within
WAYSTATION_GRACEFUL_SHUTDOWN_TIMEOUT) instead of cancelling it, then the process exits."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time

import pytest
from temporalio.api.enums.v1 import EventType

from tests.fault_helpers import worker_env
from tests.faults.test_durability import WorkerProcesses, start
from tests.faults.test_infra_faults import task_in_flight
from tests.helpers import eventually, new_validation_run

TASK_SECONDS = 3


@pytest.mark.slow
async def test_sigterm_drains_the_running_activity_then_exits(dev_env, pool, migrated_url,
                                                              task_queue, tmp_path):
    env = worker_env(migrated_url, dev_env.client.service_client.config.target_host, task_queue,
                     tmp_path / "data", delay_ms=TASK_SECONDS * 1000)
    workers = WorkerProcesses({**env, "WAYSTATION_GRACEFUL_SHUTDOWN_TIMEOUT": "20"}, tmp_path)
    worker = workers.start()
    run = await new_validation_run(pool, gates=[])
    handle = await start(dev_env.client, run, task_queue)
    try:
        await eventually(lambda: task_in_flight(pool, run.run_id, 0), timeout=60)
        async with pool.acquire() as conn:
            running = await conn.fetchval(
                "SELECT task FROM run_events WHERE run_id = $1 AND type = 'task.started' "
                "ORDER BY seq DESC LIMIT 1", run.run_id)
        began = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.to_thread(worker.wait, 30)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running 30 s after SIGTERM:\n{workers.logs()}") from None
        drained_in = time.monotonic() - began
        history = await handle.fetch_history()
    finally:
        workers.stop_all()
        await handle.terminate("test over")
    assert code == 0, workers.logs()
    assert drained_in < 20, drained_in
    async with pool.acquire() as conn:
        completed = await conn.fetchval(
            "SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'task.completed' "
            "AND task = $2", run.run_id, running)
    assert completed == 1, f"{running} did not finish before the worker left:\n{workers.logs()}"
    types = [e.event_type for e in history.events]
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED in types
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED not in types
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT not in types
    print(f"worker drained its running task and exited {drained_in:.1f}s after SIGTERM")

"""A worker SIGKILLed between Slack taking a gate's post and the read model recording its `ts`:
the next worker's retry (the run's workflow task times out, its recorder runs again) finds the
post in the channel by its metadata and adopts it. The channel shows the gate once."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from temporalio.testing import WorkflowEnvironment

from tests.faults.test_durability import WorkerProcesses, start
from tests.helpers import eventually, new_validation_run
from tests.slack_stub import TOKEN, SlackStub

CHANNEL = "CGATES"
GATE = "approve_founders_brief"


async def message_row(pool: asyncpg.Pool, run_id: uuid.UUID) -> asyncpg.Record | None:
    async with pool.acquire() as conn:
        return await conn.fetchrow(
            "SELECT m.* FROM slack_messages m JOIN hitl_requests g ON g.id = m.request_id "
            "WHERE g.run_id = $1", run_id)


# A workflow task's timeout waited out (about 10 s): the slow tier.
@pytest.mark.slow
async def test_a_worker_killed_after_slack_took_the_post_shows_the_gate_once(
        dev_env: WorkflowEnvironment, pool: asyncpg.Pool, migrated_url: str, task_queue: str,
        tmp_path: Path):
    with SlackStub() as stub:
        env = {**os.environ,
               "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
               "TEMPORAL_NAMESPACE": dev_env.client.namespace,
               "TEMPORAL_TASK_QUEUE": task_queue, "DATABASE_URL": migrated_url,
               "WAYSTATION_AGENT_BACKEND": "offline", "WAYSTATION_OTEL_EXPORTER": "none",
               "WAYSTATION_DATA_DIR": str(tmp_path / "data"),
               "WAYSTATION_SLACK_BOT_TOKEN": TOKEN, "WAYSTATION_SLACK_CHANNEL": CHANNEL,
               "WAYSTATION_SLACK_API_URL": stub.url}
        workers = WorkerProcesses(env, tmp_path)
        killed: list[int] = []

        def kill_the_worker(method: str, body: dict[str, Any]) -> None:
            """Slack has the post; its answer has not left: the worker dies now."""
            if method == "chat.postMessage" and not killed:
                killed.append(workers.procs[0].pid)
                os.kill(killed[0], signal.SIGKILL)
        stub.after_taking = kill_the_worker
        try:
            first = workers.start()
            arg = await new_validation_run(pool, gates=[GATE])
            handle = await start(dev_env.client, arg, task_queue)
            async def was_killed() -> bool:
                return bool(killed)
            await eventually(was_killed, timeout=90, interval=0.1)
            first.wait(timeout=10)
            assert first.returncode == -signal.SIGKILL, workers.logs()
            lost = await message_row(pool, arg.run_id)
            assert lost is not None and lost["ts"] is None and lost["post_started_at"]
            assert len(stub.top_level()) == 1

            workers.start()

            async def recorded() -> asyncpg.Record | None:
                row = await message_row(pool, arg.run_id)
                return row if row is not None and row["ts"] is not None else None
            try:
                row = await eventually(recorded, timeout=90, interval=0.2)
            except AssertionError:
                raise AssertionError(f"never recorded:\n{workers.logs()}") from None
            posted = stub.top_level()
            assert [m.ts for m in posted] == [row["ts"]], workers.logs()
            assert ("conversations.history", 200) in stub.calls
            assert [m for m, _ in stub.calls].count("chat.postMessage") == 1
            await handle.terminate("test done")
        finally:
            workers.stop_all()

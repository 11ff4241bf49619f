"""Issue 43: a worker SIGKILLed mid-answer while its model request streams tokens (dev server,
real Postgres, `python -m waystation worker` subprocesses). The request is retried on a new
worker after its heartbeat timeout; the retry publishes a reset, then its own deltas; the
durable transcript holds the answer once and whole, and what a client folds from the deltas is
that answer."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.agent_helpers import (
    SEARCH,
    deltas_heard,
    events_of,
    new_agent_run,
    shown_text,
    start_agent,
)
from tests.fault_helpers import eventually_or_logs, run_paused, worker_env
from tests.faults.test_durability import WorkerProcesses

# A slow model: each word this many milliseconds apart, so the worker dies mid-answer.
TOKEN_MS = 60


@pytest.fixture
def workers(dev_env: WorkflowEnvironment, migrated_url: str, task_queue: str,
            tmp_path: Path) -> Iterator[WorkerProcesses]:
    env = worker_env(migrated_url, dev_env.client.service_client.config.target_host,
                     task_queue, tmp_path / "data")
    procs = WorkerProcesses({**env, "WAYSTATION_OFFLINE_TOKEN_MS": str(TOKEN_MS)}, tmp_path)
    yield procs
    procs.stop_all()


@pytest.mark.slow
async def test_worker_sigkilled_mid_answer_leaves_the_transcript_whole(dev_env, pool,
                                                                       task_queue, workers):
    arg = await new_agent_run(pool, message=SEARCH)
    async with deltas_heard(pool) as notes:
        first = workers.start()
        await start_agent(dev_env.client, arg, task_queue)

        async def mid_answer() -> bool:
            async with pool.acquire() as conn:
                return bool(await conn.fetchval(
                    "SELECT 1 FROM message_partials WHERE run_id = $1 AND text LIKE 'I found%'",
                    arg.run_id))
        await eventually_or_logs(mid_answer, workers.logs, "no answer written; worker log",
                                 timeout=60, interval=0.05)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        workers.start()
        await eventually_or_logs(lambda: run_paused(pool, arg.run_id), workers.logs,
                                 "turn not finished; logs", timeout=90, interval=0.2)

    events = await events_of(pool, arg.run_id)
    answers = [e.output for e in events if e.type == "agent.answered"]
    assert len(answers) == 1 and answers[0]["text"].startswith("I found 3: ")
    assert answers[0]["text"].endswith(".")
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    mine = [n for n in notes if n["message_id"] == answers[0]["message_id"]]
    assert any(n.get("reset") and n["attempt"] >= 2 for n in mine), "the retry reset it"
    assert any(n["attempt"] == 1 and n.get("delta") for n in mine), "shown before the kill"
    assert shown_text(notes, answers[0]["message_id"]) == answers[0]["text"]
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM message_partials WHERE run_id = $1",
                                   arg.run_id) == 0

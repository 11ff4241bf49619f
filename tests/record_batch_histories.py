"""Record BatchJob histories for the replay test: `python -m tests.record_batch_histories`.

Runs the batch workflow on the time-skipping server with the real read model (an embedded
PostgreSQL in a temporary folder) through its interesting paths and writes each history to
tests/histories/batch_<case>.json; tests/test_replay.py replays them all. Re-record only on
purpose, and check the files in.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
from temporalio.client import WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from activities.agents import AgentRequest
from persistence import runs as runs_repo
from persistence.db import create_pool
from persistence.embedded import embedded_database_url, stop_embedded
from persistence.migrate import apply_migrations
from tests.batch_helpers import ScriptedBackend, new_batch_run
from tests.helpers import eventually
from tests.record_histories import HISTORIES, _binary
from waystation.temporal_client import register_search_attributes
from waystation.worker import build_worker
from workflows.batch import TEST_GATE, BatchJob, batch_workflow_id
from workflows.batch_models import BatchRunInput, PauseInput
from workflows.gates import DecisionInput

TASK_QUEUE = "record-batch-histories"
STEPS = [
    {"name": "summarize", "template": "Summarize: {{ item.text }}",
     "branches": [{"when": "item.short", "goto": "end"}]},
    {"name": "grade", "template": "Grade: {{ outputs.summarize.text }}"},
]
Case = Callable[[WorkflowEnvironment, asyncpg.Pool], Awaitable[WorkflowHandle]]


def _rule(request: AgentRequest, n: int) -> dict:
    if "fails" in request.instructions and n == 1:
        raise RuntimeError("first attempt fails")
    if "broken" in request.instructions:
        raise RuntimeError("always fails")
    return {"text": f"{request.task} done"}


async def _start(env: WorkflowEnvironment, arg: BatchRunInput) -> WorkflowHandle:
    return await env.client.start_workflow(BatchJob.run, arg, id=batch_workflow_id(arg.run_id),
                                           task_queue=TASK_QUEUE)


async def pipeline_continue_as_new(env: WorkflowEnvironment, pool: asyncpg.Pool
                                   ) -> WorkflowHandle:
    items = [{"text": f"t{i}", "short": i % 2 == 0} for i in range(5)]
    items.append({"text": "fails", "short": False})
    arg = await new_batch_run(pool, items=items, steps=STEPS, max_workers=2, round_size=4,
                              retry_initial_seconds=0.1)
    return await _start(env, arg)


async def slices_with_retry(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    """Slices of three items; one item fails in its slice and is retried alone."""
    items = [{"text": f"t{i}", "short": True} for i in range(12)]
    items[4] = {"text": "fails", "short": True}
    arg = await new_batch_run(pool, items=items, steps=STEPS, max_workers=1,
                              retry_initial_seconds=0.1)
    return await _start(env, arg)


async def test_gate_proceed(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    items = [{"text": t, "short": False} for t in ("broken", "a", "b")]
    arg = await new_batch_run(pool, items=items, steps=STEPS, test_first=True, max_retries=0,
                              failure_threshold=0.5)
    handle = await _start(env, arg)

    async def waiting() -> bool:
        async with pool.acquire() as conn:
            run = await runs_repo.get_run(conn, arg.run_id)
        return run is not None and run.hitl_state == TEST_GATE
    await eventually(waiting, timeout=30)
    await handle.execute_update(BatchJob.decide, DecisionInput(
        checkpoint_name=TEST_GATE, decision="proceed", decided_by="alice"))
    return handle


async def pause_resume(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    items = [{"text": f"t{i}", "short": True} for i in range(6)]
    arg = await new_batch_run(pool, items=items, steps=STEPS, max_workers=1)
    handle = await _start(env, arg)
    await handle.execute_update(BatchJob.pause, PauseInput(requested_by="alice"))
    await asyncio.sleep(0.2)
    await handle.execute_update(BatchJob.resume, PauseInput(requested_by="alice"))
    return handle


CASES: dict[str, Case] = {
    "pipeline_continue_as_new": pipeline_continue_as_new,
    "slices_with_retry": slices_with_retry,
    "test_gate_proceed": test_gate_proceed,
    "pause_resume": pause_resume,
}


async def record(url: str) -> dict[str, str]:
    conn = await asyncpg.connect(url)
    try:
        await apply_migrations(conn)
    finally:
        await conn.close()
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        test_server_existing_path=_binary("temporal-test-server"))
    histories: dict[str, str] = {}
    try:
        await register_search_attributes(env.client, "default")
        pool = await create_pool(url)
        try:
            async with build_worker(env.client, pool, task_queue=TASK_QUEUE,
                                    backend=ScriptedBackend(_rule)):
                for name, case in CASES.items():
                    handle = await case(env, pool)
                    await handle.result()
                    # The first run's history: for the continue-as-new case, a whole round.
                    history = await handle.fetch_history()
                    histories[name] = history.to_json()
                    print(f"{name}: {len(history.events)} events")
        finally:
            await pool.close()
    finally:
        await env.shutdown()
    return histories


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HISTORIES)
    args = parser.parse_args(argv)
    pgdata = Path(tempfile.mkdtemp(prefix="waystation-histories-pg-")) / "pgdata"
    try:
        histories = asyncio.run(record(embedded_database_url(pgdata)))
    finally:
        stop_embedded(pgdata)
        shutil.rmtree(pgdata.parent, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in histories.items():
        path = args.out / f"batch_{name}.json"
        path.write_text(text + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

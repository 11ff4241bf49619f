"""Record MobileAgentRun histories for the replay test: `python -m tests.record_mobile_histories`.

Runs the workflow on the time-skipping test server with the real read model (an embedded
PostgreSQL in a temporary folder) through its interesting paths and writes each history to
tests/histories/mobile_<case>.json; tests/test_replay.py replays them against the current
code. Re-record only on purpose, as for the validation histories.
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

from activities.agents import backend_named
from persistence import runs as runs_repo
from persistence.db import create_pool
from persistence.embedded import embedded_database_url, stop_embedded
from persistence.migrate import apply_migrations
from tests.helpers import eventually
from tests.mobile_helpers import NOTES, SHOP, new_mobile_run
from tests.record_histories import _binary
from waystation.temporal_client import register_search_attributes
from waystation.worker import build_worker
from workflows.gates import DecisionInput
from workflows.mobile import WORKFLOW_TASK_TIMEOUT, MobileAgentRun, mobile_workflow_id

HISTORIES = Path(__file__).resolve().parent / "histories"
TASK_QUEUE = "record-mobile-histories"

Case = Callable[[WorkflowEnvironment, asyncpg.Pool], Awaitable[WorkflowHandle]]


async def _start(env: WorkflowEnvironment, pool: asyncpg.Pool, **fields: object
                 ) -> WorkflowHandle:
    arg = await new_mobile_run(pool, **fields)
    return await env.client.start_workflow(MobileAgentRun.run, arg,
                                           id=mobile_workflow_id(arg.run_id),
                                           task_queue=TASK_QUEUE,
                                           task_timeout=WORKFLOW_TASK_TIMEOUT)


async def explore_continue_as_new(env: WorkflowEnvironment, pool: asyncpg.Pool
                                  ) -> WorkflowHandle:
    # The first of several histories: it ends in continue-as-new, carrying the policy state.
    return await _start(env, pool, app_package=NOTES, max_steps=60, continue_as_new_every=30,
                        sensitive_actions="allow", seed=5)


async def sensitive_gates(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    handle = await _start(env, pool, app_package=SHOP, max_steps=60, seed=1)
    run_id = handle.id.removeprefix("mobile-")
    decided: list[str] = []

    async def gate_or_done() -> str | None:
        desc = await handle.describe()
        if desc.status is not None and desc.status.name != "RUNNING":
            return "done"
        async with pool.acquire() as conn:
            run = await runs_repo.get_run(conn, run_id)  # type: ignore[arg-type]
        return run.hitl_state if run and run.hitl_state not in decided else None

    while (checkpoint := await eventually(gate_or_done, timeout=60)) != "done":
        await handle.execute_update(MobileAgentRun.decide, DecisionInput(
            checkpoint_name=checkpoint, decision="reject" if decided else "approve",
            decided_by="alice"))
        decided.append(checkpoint)
    return handle


CASES: dict[str, Case] = {
    "explore_continue_as_new": explore_continue_as_new,
    "sensitive_gates": sensitive_gates,
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
                                    backend=backend_named("offline")):
                for name, case in CASES.items():
                    handle = await case(env, pool)
                    try:
                        await handle.result()
                    except Exception as error:  # continue-as-new: the chain's last result
                        raise SystemExit(f"{name} failed: {error}") from error
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
        path = args.out / f"mobile_{name}.json"
        path.write_text(text + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Record ValidationRun histories for the replay test: `python -m tests.record_histories`.

Runs the workflow on the time-skipping test server with the real read model (an embedded
PostgreSQL in a temporary folder, migrated) through the interesting paths, and writes each
history to tests/histories/validation_<case>.json. tests/test_replay.py replays every file
there against the current workflow code, so a change that breaks determinism for runs already
in flight fails the suite. Re-record only on purpose (a deliberately incompatible change that
ships behind a new workflow name or a patch), and check the files in.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import asyncpg
from temporalio.client import WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from activities.agents import backend_named
from persistence import gates as gates_repo
from persistence import runs as runs_repo
from persistence.db import create_pool
from persistence.embedded import embedded_database_url, stop_embedded
from persistence.migrate import apply_migrations
from tests.helpers import eventually, new_validation_run
from waystation.temporal_client import register_search_attributes
from waystation.worker import build_worker
from workflows.gates import DecisionInput, ReopenInput
from workflows.validation import ValidationRun, validation_workflow_id

HISTORIES = Path(__file__).resolve().parent / "histories"
TASK_QUEUE = "record-histories"
GATES = ("approve_founders_brief", "approve_vpc_completion", "approve_desirability_gate")

Case = Callable[[WorkflowEnvironment, asyncpg.Pool], Awaitable[WorkflowHandle]]


async def _start(env: WorkflowEnvironment, pool: asyncpg.Pool, **fields: object
                 ) -> tuple[WorkflowHandle, uuid.UUID]:
    arg = await new_validation_run(pool, **fields)
    handle = await env.client.start_workflow(ValidationRun.run, arg,
                                             id=validation_workflow_id(arg.run_id),
                                             task_queue=TASK_QUEUE)
    return handle, arg.run_id


async def _wait_gate(pool: asyncpg.Pool, run_id: uuid.UUID, checkpoint: str) -> None:
    async def pending() -> bool:
        async with pool.acquire() as conn:
            run = await runs_repo.get_run(conn, run_id)
        return run is not None and run.hitl_state == checkpoint
    await eventually(pending, timeout=30)


async def _decide(handle: WorkflowHandle, checkpoint: str, decision: str = "approve",
                  feedback: str | None = None) -> None:
    await handle.execute_update(ValidationRun.decide, DecisionInput(
        checkpoint_name=checkpoint, decision=decision, decided_by="alice", feedback=feedback))


async def approve_all(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    handle, run_id = await _start(env, pool)
    for checkpoint in GATES:
        await _wait_gate(pool, run_id, checkpoint)
        await _decide(handle, checkpoint, feedback="fine")
    return handle


async def reject_segment_override(env: WorkflowEnvironment, pool: asyncpg.Pool
                                  ) -> WorkflowHandle:
    handle, run_id = await _start(env, pool)
    await _wait_gate(pool, run_id, GATES[0])
    await _decide(handle, GATES[0], "reject", feedback="focus on dentists")
    await _wait_until_attempt(handle, 0, 2)
    await _wait_gate(pool, run_id, GATES[0])
    await _decide(handle, GATES[0])

    await _wait_gate(pool, run_id, GATES[1])
    async with pool.acquire() as conn:
        gate = await gates_repo.latest_gate_for_checkpoint(conn, run_id, GATES[1])
    assert gate is not None
    segment = next(o for o in gate.options if o.value.startswith("segment_"))
    await _decide(handle, GATES[1], segment.value)
    await _wait_until_attempt(handle, 1, 2)
    await _wait_gate(pool, run_id, GATES[1])
    await _decide(handle, GATES[1])

    await _wait_gate(pool, run_id, GATES[2])
    await _decide(handle, GATES[2], "override_proceed", feedback="we accept the risk")
    return handle


async def expire_pause_reopen(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    handle, run_id = await _start(env, pool, gates=[GATES[0]], expiry_policy="pause")
    await _wait_gate(pool, run_id, GATES[0])
    await env.sleep(timedelta(days=7, seconds=1))

    async def paused() -> bool:
        async with pool.acquire() as conn:
            run = await runs_repo.get_run(conn, run_id)
        return run is not None and run.status == "paused" and run.hitl_state is None
    await eventually(paused, timeout=30)
    await handle.execute_update(ValidationRun.reopen,
                                ReopenInput(checkpoint_name=GATES[0], requested_by="alice"))
    await _wait_gate(pool, run_id, GATES[0])
    await _decide(handle, GATES[0])
    return handle


async def _wait_until_attempt(handle: WorkflowHandle, phase: int, attempt: int) -> None:
    async def reached() -> bool:
        state = await handle.query(ValidationRun.state)
        return state.phase_attempts.get(phase, 0) >= attempt
    await eventually(reached, timeout=30)


CASES: dict[str, Case] = {
    "approve_all": approve_all,
    "reject_segment_override": reject_segment_override,
    "expire_pause_reopen": expire_pause_reopen,
}


def _binary(name: str) -> str:
    found = Path(sys.executable).parent / name
    which = str(found) if found.exists() else shutil.which(name)
    if not which:
        raise SystemExit(f"{name} not found; install the project with its test extra")
    return which


async def record(url: str, only: list[str] | None = None) -> dict[str, str]:
    """Run the cases against the migrated database at `url`; return each case's history JSON."""
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
                    if only and name not in only:
                        continue
                    handle = await case(env, pool)
                    result = await handle.result()
                    assert result.status == "completed", result
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
    parser.add_argument("cases", nargs="*", help=f"any of {', '.join(CASES)} (default: all)")
    parser.add_argument("--out", type=Path, default=HISTORIES)
    args = parser.parse_args(argv)
    if unknown := set(args.cases) - set(CASES):
        parser.error(f"unknown case(s): {', '.join(sorted(unknown))}")
    pgdata = Path(tempfile.mkdtemp(prefix="waystation-histories-pg-")) / "pgdata"
    try:
        histories = asyncio.run(record(embedded_database_url(pgdata), args.cases or None))
    finally:
        stop_embedded(pgdata)
        shutil.rmtree(pgdata.parent, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in histories.items():
        path = args.out / f"validation_{name}.json"
        path.write_text(text + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What every history recorder shares: run cases on a time-skipping server against a fresh
embedded PostgreSQL, and write each case's history to tests/histories/<prefix>_<case>.json.

The recorders (`python -m tests.tools.record_histories`, `tests.tools.record_batch_histories`,
`tests.tools.record_mobile_histories`) only define their cases; tests/replay/test_replay.py
replays every file against the current workflow code. The notification recorders, which drive a
whole local stack instead, share its gated run and the writing of a history.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from temporalio.client import WorkflowHandle, WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from tests.helpers import IDEA
from tests.webhook_receiver import Receiver
from waystation.activities.agents import AgentBackend
from waystation.persistence.db import create_pool
from waystation.persistence.embedded import embedded_database_url, stop_embedded
from waystation.persistence.migrate import apply_migrations
from waystation.registry import load_registry
from waystation.temporal_client import DATA_CONVERTER, register_search_attributes
from waystation.testing import LocalStack, installed_binary
from waystation.worker import build_worker

HISTORIES = Path(__file__).resolve().parents[1] / "histories"

# A case starts a workflow, drives it (decisions, pauses) and returns its handle.
Case = Callable[[WorkflowEnvironment, asyncpg.Pool], Awaitable[WorkflowHandle]]


async def record(url: str, cases: dict[str, Case], *, task_queue: str,
                 backend: AgentBackend) -> dict[str, str]:
    """Run the cases against the database at `url`; return each case's history JSON (for a
    run that continued as new, the last run's)."""
    conn = await asyncpg.connect(url)
    try:
        await apply_migrations(conn, folders=load_registry(
            use_entry_points=False).migration_folders())
    finally:
        await conn.close()
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=DATA_CONVERTER,
        test_server_existing_path=installed_binary("temporal-test-server"))
    histories: dict[str, str] = {}
    try:
        await register_search_attributes(env.client, "default")
        pool = await create_pool(url)
        try:
            async with build_worker(env.client, pool, task_queue=task_queue, backend=backend):
                for name, case in cases.items():
                    handle = await case(env, pool)
                    await handle.result()
                    history = await handle.fetch_history()
                    histories[name] = history.to_json()
                    print(f"{name}: {len(history.events)} events")
        finally:
            await pool.close()
    finally:
        await env.shutdown()
    return histories


def main(argv: list[str] | None, *, description: str, prefix: str, cases: dict[str, Case],
         task_queue: str, backend: AgentBackend) -> int:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("cases", nargs="*", help=f"any of {', '.join(cases)} (default: all)")
    parser.add_argument("--out", type=Path, default=HISTORIES)
    args = parser.parse_args(argv)
    if unknown := set(args.cases) - set(cases):
        parser.error(f"unknown case(s): {', '.join(sorted(unknown))}")
    chosen = {name: case for name, case in cases.items() if not args.cases or name in args.cases}
    pgdata = Path(tempfile.mkdtemp(prefix="waystation-histories-pg-")) / "pgdata"
    try:
        histories = asyncio.run(record(embedded_database_url(pgdata), chosen,
                                       task_queue=task_queue, backend=backend))
    finally:
        stop_embedded(pgdata)
        shutil.rmtree(pgdata.parent, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in histories.items():
        path = args.out / f"{prefix}_{name}.json"
        path.write_text(text + "\n")
        print(f"wrote {path}")
    return 0


async def gated_run(http: httpx.AsyncClient) -> dict[str, Any]:
    """A validation run started through a local stack's API, which waits at its one gate."""
    return (await http.post("/runs", json={"kind": "validation", "input": {
        "entrepreneur_input": IDEA, "gates": ["approve_founders_brief"]}})).json()


def gate_opened_deliveries(stack: LocalStack, run: dict[str, Any],
                           receiver: Receiver) -> WorkflowHandle:
    """The workflow delivering `gated_run`'s `gate.opened` event (the request it names is in the
    last body the receiver took)."""
    request_id = json.loads(receiver.received[-1].body)["data"]["request_id"]
    return stack.temporal.get_workflow_handle(
        f"webhooks-{run['run_id']}-gate.opened:{request_id}")


def write_history(name: str, history: WorkflowHistory) -> None:
    path = HISTORIES / f"{name}.json"
    path.write_text(history.to_json() + "\n")
    print(f"wrote {path}: {len(history.events)} events")

"""The toy as a Waystation run kind (bench.peer_toy), started as the API starts runs, decided
by the `decide` Update; and the raw-Temporal baseline of the same shape on the same server
(one no-op activity per step, writing nothing). Run by bench.bench_peers."""

from __future__ import annotations

import asyncio
import time
import uuid
from uuid import UUID

import asyncpg
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.agents import backend_named
from api.run_kinds import start_run
from bench.common import RawGate, RawShape, expect_start, raw_task
from bench.peer_toy import GATE, ToyInput
from bench.peers_common import (
    APPROVE_AFTER,
    HUMAN_PAUSE_S,
    PHASES,
    Figures,
    Plan,
    figures,
    harness_main,
    measure_toy,
    throughput,
    wait_for_row,
)
from persistence.db import create_pool
from persistence.migrate import apply_migrations
from persistence.runs import create_run
from waystation.registry import load_registry
from waystation.testing import DEV_SERVER_ARGS, installed_binary
from waystation.worker import build_worker
from workflows import search_attributes
from workflows.gated import GatedWorkflow
from workflows.gates import DecisionInput

STEP_TIMES = ("SELECT created_at FROM run_events WHERE run_id = $1::uuid "
              "AND type = 'step.completed' ORDER BY seq")


async def measure(plan: Plan) -> list[Figures]:
    conn = await asyncpg.connect(plan.database_url)
    await apply_migrations(conn)
    env = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        dev_server_existing_path=installed_binary("temporal"),
        search_attributes=search_attributes.ALL, dev_server_extra_args=DEV_SERVER_ARGS)
    pool = await create_pool(plan.database_url, max_size=plan.concurrency + 10)
    try:
        return [await _waystation(plan, env.client, pool, conn),
                await _raw(plan, env.client)]
    finally:
        await pool.close()
        await env.shutdown()
        await conn.close()


async def _waystation(plan: Plan, client: Client, pool: asyncpg.Pool,
                      conn: asyncpg.Connection) -> Figures:
    registry = load_registry(["bench.peer_toy"], use_entry_points=False)
    kind = registry.kind("peer_toy")
    queue = f"peers-{uuid.uuid4()}"

    async def start(approve_after: int | None) -> tuple[UUID, WorkflowHandle]:
        run_id = uuid.uuid4()
        async with pool.acquire() as c:  # the runs row first, as the API writes it
            run, _ = await create_run(
                c, run_id=run_id, kind=kind.name, owner="bench", group_id=None,
                workflow_id=kind.workflow_id(run_id), idempotency_key=None,
                input=ToyInput(approve_after=approve_after).model_dump(mode="json"))
        await start_run(client, queue, kind, run)
        return run_id, client.get_workflow_handle(run.workflow_id)

    async def run_straight() -> str:
        run_id, handle = await start(None)
        await handle.result()
        return str(run_id)

    async with build_worker(client, pool, task_queue=queue, backend=backend_named("noop"),
                            registry=registry):
        async def approve_one() -> float:
            run_id, handle = await start(APPROVE_AFTER)
            await wait_for_row(conn, "SELECT 1 FROM hitl_requests WHERE run_id = $1 "
                                     "AND status = 'pending'", run_id)
            await asyncio.sleep(HUMAN_PAUSE_S)  # let its workflow task finish
            sent = time.time()
            await handle.execute_update(GatedWorkflow.decide, DecisionInput(
                checkpoint_name=GATE, decision="approve", decided_by="bench"))
            row = await wait_for_row(conn, "SELECT created_at FROM run_events "
                                           "WHERE run_id = $1 AND event_key = $2",
                                     run_id, f"step.{APPROVE_AFTER + 1}")
            await handle.result()
            return (row[0].timestamp() - sent) * 1000

        return await measure_toy("Waystation (toy run kind)", plan, conn, STEP_TIMES,
                                 run_straight=run_straight, approve_one=approve_one)


async def _raw(plan: Plan, client: Client) -> Figures:
    queue = f"peers-raw-{uuid.uuid4()}"

    async def run_shape() -> float:
        began = time.perf_counter()
        await client.execute_workflow(RawShape.run, [1] * PHASES, id=f"raw-{uuid.uuid4()}",
                                      task_queue=queue)
        return (time.perf_counter() - began) * 1000 / PHASES

    async with Worker(client, task_queue=queue, workflows=[RawGate, RawShape],
                      activities=[raw_task]):
        for _ in range(3):
            await run_shape()
        steps = [await run_shape() for _ in range(plan.runs)]
        approvals: list[float] = []
        for _ in range(plan.approvals):
            workflow_id = f"raw-gate-{uuid.uuid4()}"
            handle = await client.start_workflow(RawGate.run, id=workflow_id, task_queue=queue)
            while not await handle.query(RawGate.waiting):
                pass
            started = expect_start(workflow_id)
            sent = time.perf_counter()
            await handle.execute_update(RawGate.decide, "approve")
            approvals.append((await started - sent) * 1000)
            await handle.result()

        async def one_run() -> None:
            await run_shape()
        rps = await throughput(one_run, plan.throughput_runs, plan.concurrency)
    return figures("raw Temporal (one activity per step, Update)", steps, approvals, rps)


if __name__ == "__main__":
    harness_main(measure)

"""The toy as a Waystation run kind (bench.peer_toy) and the built-in validation kind (noop
backend; its tasks in place, and as regular activities), started as the API starts runs,
decided by the `decide` Update; the built-in agent
kind (the planner, offline model) taking the conversation's messages by `post_message`; and
the raw-Temporal baseline of the toy's and the validation's shapes on the same server (one
no-op activity per step, writing nothing). Run by bench.bench_peers."""

from __future__ import annotations

import asyncio
import time
import uuid
from functools import partial
from typing import Any
from uuid import UUID

import asyncpg
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from bench import peer_agent
from bench.bench_agent import EVENTS_CHANNEL, Answers, Conversation
from bench.bench_validation import GATE as VALIDATION_GATE
from bench.bench_validation import IDEA, NEXT_TASK_KEY
from bench.common import RawGate, RawShape, expect_start, raw_task
from bench.peer_toy import GATE, ToyInput
from bench.peers_common import (
    HUMAN_PAUSE_S,
    TOY,
    VALIDATION,
    VALIDATION_TASKS,
    CpuMeter,
    Figures,
    Plan,
    Shape,
    figures,
    harness_main,
    measure_agent,
    measure_shape,
    throughput,
    wait_for_row,
)
from waystation.activities.agents import backend_named
from waystation.api.run_kinds import start_run
from waystation.contracts.kinds import StartCheck
from waystation.kinds.validation.models import TasksMode, ValidationInput
from waystation.persistence.db import create_pool
from waystation.persistence.migrate import apply_migrations
from waystation.persistence.runs import create_run
from waystation.registry import load_registry
from waystation.settings import Settings
from waystation.temporal_client import DATA_CONVERTER
from waystation.testing import DEV_SERVER_ARGS, installed_binary
from waystation.worker import build_worker
from waystation.workflows import search_attributes
from waystation.workflows.gate_handlers import GatedWorkflow
from waystation.workflows.gate_rules import DecisionInput

STEP_TIMES = ("SELECT created_at FROM run_events WHERE run_id = $1::uuid "
              "AND type = 'step.completed' ORDER BY seq")
TASK_TIMES = ("SELECT created_at FROM run_events WHERE run_id = $1::uuid "
              "AND type = 'task.completed' ORDER BY seq")


# What the API's settings would say: the worker's backend (the kinds' start-time hooks read it).
SETTINGS = Settings(agent_backend="noop")


class KindCase:
    """How one gated kind is started, decided and timed: the toy or the validation kind; for
    the latter, its crew tasks as the API settles `auto` for the noop backend (in place), or
    as regular activities (`tasks: activity`, how every run ran them before issue 31)."""

    def __init__(self, shape: Shape, tasks: TasksMode = "auto") -> None:
        self.shape = shape
        self.tasks = tasks
        toy = shape.kind == "toy"
        self.kind_name = "peer_toy" if toy else "validation"
        self.system = ("Waystation (toy run kind)" if toy else
                       "Waystation (validation, noop)" if tasks == "auto" else
                       "Waystation (validation, noop, tasks as regular activities)")
        self.gate = GATE if toy else VALIDATION_GATE
        self.step_sql = STEP_TIMES if toy else TASK_TIMES
        # The event of the step after the approval.
        self.next_key = f"step.{shape.approve_after + 1}" if toy else NEXT_TASK_KEY

    def input(self, gated: bool) -> dict[str, Any]:
        if self.shape.kind == "toy":
            return ToyInput(approve_after=self.shape.approve_after if gated else None
                            ).model_dump(mode="json")
        return ValidationInput(entrepreneur_input=IDEA, gates=[self.gate] if gated else [],
                               tasks=self.tasks).model_dump(mode="json")


async def measure(plan: Plan) -> list[Figures]:
    conn = await asyncpg.connect(plan.database_url)
    await apply_migrations(conn, folders=load_registry().migration_folders())
    env = await WorkflowEnvironment.start_local(
        data_converter=DATA_CONVERTER,
        dev_server_existing_path=installed_binary("temporal"),
        search_attributes=search_attributes.ALL, dev_server_extra_args=DEV_SERVER_ARGS)
    pool = await create_pool(plan.database_url, max_size=plan.concurrency + 10)
    try:
        results = []
        for shape in (TOY, VALIDATION):
            if shape.kind in plan.kinds:
                results += [await _waystation(plan, env.client, pool, conn, KindCase(shape)),
                            await _raw(plan, env.client, shape)]
                if shape.kind == "validation":
                    results.append(await _waystation(plan, env.client, pool, conn,
                                                     KindCase(shape, tasks="activity")))
        if "agent" in plan.kinds:
            results.append(await _agent(plan, env.client, pool))
        return results
    finally:
        await pool.close()
        await env.shutdown()
        await conn.close()


async def _waystation(plan: Plan, client: Client, pool: asyncpg.Pool,
                      conn: asyncpg.Connection, case: KindCase) -> Figures:
    registry = load_registry(["bench.peer_toy"], use_entry_points=False)
    kind = registry.kind(case.kind_name)
    queue = f"peers-{uuid.uuid4()}"

    async def start(gated: bool) -> tuple[UUID, WorkflowHandle]:
        run_id = uuid.uuid4()
        run_input = kind.input_model.model_validate(case.input(gated))
        async with pool.acquire() as c:  # the runs row first, as the API writes it
            if kind.api.start_check is not None:
                await kind.api.start_check(StartCheck(input=run_input, user=None,
                                                  settings=SETTINGS, conn=c))
            run, _ = await create_run(
                c, run_id=run_id, kind=kind.name, owner="bench", group_id=None,
                workflow_id=kind.workflow_id(run_id), idempotency_key=None,
                input=run_input.model_dump(mode="json"))
        await start_run(client, queue, kind, run)
        return run_id, client.get_workflow_handle(run.workflow_id)

    async def run_straight() -> str:
        run_id, handle = await start(False)
        await handle.result()
        return str(run_id)

    async with build_worker(client, pool, task_queue=queue, backend=backend_named("noop"),
                            registry=registry):
        async def approve_one() -> float:
            run_id, handle = await start(True)
            await wait_for_row(conn, "SELECT 1 FROM hitl_requests WHERE run_id = $1 "
                                     "AND status = 'pending'", run_id)
            await asyncio.sleep(HUMAN_PAUSE_S)  # let its workflow task finish
            sent = time.time()
            await handle.execute_update(GatedWorkflow.decide, DecisionInput(
                checkpoint_name=case.gate, decision="approve", decided_by="bench"))
            row = await wait_for_row(conn, "SELECT created_at FROM run_events "
                                           "WHERE run_id = $1 AND event_key = $2",
                                     run_id, case.next_key)
            await handle.result()
            return (row[0].timestamp() - sent) * 1000

        return await measure_shape(case.system, case.shape, plan, conn, case.step_sql,
                                   run_straight=run_straight, approve_one=approve_one)


async def _agent(plan: Plan, client: Client, pool: asyncpg.Pool) -> Figures:
    """The planner as the `agent` run kind; the worker and the model in this process."""
    answers = Answers(pool)
    listener = await asyncpg.connect(plan.database_url)
    await listener.add_listener(EVENTS_CHANNEL, answers.on_notify)
    queue = f"peers-agent-{uuid.uuid4()}"
    try:
        async with build_worker(client, pool, task_queue=queue,
                                backend=backend_named("offline")):
            return await measure_agent("Waystation (agent run kind)", plan,
                                       converse=partial(_converse, client, pool, queue,
                                                        answers))
    finally:
        await listener.close()


async def _converse(client: Client, pool: asyncpg.Pool, queue: str, answers: Answers,
                    timed: bool) -> list[tuple[float, float]]:
    conversation = await Conversation.start(client, pool, queue, answers)
    # Many at once (runs/s) poll the run's state less often, not to crowd the server.
    poll = 0.002 if timed else 0.02
    turns = []
    for text in peer_agent.MESSAGES:
        await conversation.waiting_for_message(poll)
        if timed:
            peer_agent.FIRST_REQUEST.reset()
        sent = time.perf_counter()
        await conversation.durable_turn(text)
        if timed:
            turns.append(((time.perf_counter() - sent) * 1000,
                          peer_agent.FIRST_REQUEST.since(sent)))
    await conversation.end(poll)
    return turns


async def _raw(plan: Plan, client: Client, shape: Shape) -> Figures:
    queue = f"peers-raw-{uuid.uuid4()}"
    phases = [1] * shape.steps if shape.kind == "toy" else list(VALIDATION_TASKS)

    async def run_shape() -> float:
        began = time.perf_counter()
        await client.execute_workflow(RawShape.run, phases, id=f"raw-{uuid.uuid4()}",
                                      task_queue=queue)
        return (time.perf_counter() - began) * 1000 / shape.steps

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
        rps, cpu = await throughput(one_run, plan.throughput_runs, plan.concurrency,
                                    await CpuMeter.for_database(plan.database_url))
    return figures("raw Temporal (one activity per step, Update)", steps, approvals, rps,
                   shape.kind, cpu)


if __name__ == "__main__":
    harness_main(measure)

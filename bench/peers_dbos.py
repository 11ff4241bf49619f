"""The toy and the validation-like shape in DBOS Transact (run by bench.bench_peers): a
workflow of sequential steps, each writing one progress event (DBOS checkpoints each step's
output: the snapshot); the gated run waits in `recv` after its approval step until the
benchmark `send`s the approval. The agent conversation: a workflow that `recv`s each message
and runs the planner's ReAct turn (bench.peer_agent), each model request and tool call a step
writing one progress event."""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import Any

import asyncpg
from dbos import DBOS

from bench import peer_agent
from bench.peers_common import (
    EVENTS_TABLE,
    HUMAN_PAUSE_S,
    INSERT_EVENT,
    TOY,
    VALIDATION,
    Figures,
    Plan,
    Shape,
    harness_main,
    measure_agent,
    measure_shape,
    new_run_id,
    next_step_ms,
    wait_for_row,
)

STEP_TIMES = "SELECT created_at FROM peer_events WHERE run_id = $1 ORDER BY step"
_pool: asyncpg.Pool | None = None


@DBOS.step()
async def toy_step(run_id: str, number: int) -> dict[str, int]:
    assert _pool is not None
    await _pool.execute(INSERT_EVENT, run_id, number)
    return {"phase": number}


@DBOS.workflow()
async def toy(run_id: str, steps: int, approve_after: int | None) -> int:
    for number in range(1, steps + 1):
        await toy_step(run_id, number)
        if number == approve_after:
            await DBOS.recv_async("approve", timeout_seconds=600)
    return steps


@DBOS.step()
async def model_step(run_id: str, number: int, history: list[Any]) -> list[Any]:
    assert _pool is not None
    response = await peer_agent.model_request(history)
    await _pool.execute(INSERT_EVENT, run_id, number)
    return response


@DBOS.step()
async def tool_step(run_id: str, number: int, call_id: str, name: str,
                    args: dict[str, Any]) -> list[Any]:
    assert _pool is not None
    returned = await peer_agent.call_tool(call_id, name, args)
    await _pool.execute(INSERT_EVENT, run_id, number)
    return returned


@DBOS.workflow()
async def conversation(run_id: str) -> int:
    history: list[Any] = []
    number = 0
    for turn in range(len(peer_agent.MESSAGES)):
        text = await DBOS.recv_async("message", timeout_seconds=600)
        history += peer_agent.user_message(text)
        while True:
            number += 1
            response = await model_step(run_id, number, history)
            history += response
            calls = peer_agent.tool_calls(response)
            if not calls:
                break
            for call_id, name, args in calls:
                number += 1
                history += await tool_step(run_id, number, call_id, name, args)
        number += 1
        await model_step(run_id, number, history + peer_agent.summary_request())
        await DBOS.set_event_async(f"turn{turn}", number)
    return number


async def measure(plan: Plan) -> list[Figures]:
    global _pool
    conn = await asyncpg.connect(plan.database_url)
    await conn.execute(EVENTS_TABLE)
    _pool = await asyncpg.create_pool(plan.database_url, min_size=1,
                                      max_size=plan.concurrency + 5)
    system_url = await _system_database(conn, plan.database_url)
    DBOS(config={"name": "waystation-peers", "system_database_url": system_url})
    DBOS.launch()
    results = []
    try:
        for shape in (TOY, VALIDATION):
            if shape.kind in plan.kinds:
                results.append(await measure_shape(
                    "DBOS Transact", shape, plan, conn, STEP_TIMES,
                    run_straight=partial(_run_straight, shape),
                    approve_one=partial(_approve_one, conn, shape)))
        if "agent" in plan.kinds:
            results.append(await measure_agent("DBOS Transact", plan, converse=_converse))
    finally:
        DBOS.destroy()
        await _pool.close()
        await conn.close()
    return results


async def _run_straight(shape: Shape) -> str:
    run_id = new_run_id()
    handle: Any = await DBOS.start_workflow_async(toy, run_id, shape.steps, None)
    await handle.get_result()
    return run_id


async def _approve_one(conn: asyncpg.Connection, shape: Shape) -> float:
    run_id = new_run_id()
    handle = await DBOS.start_workflow_async(toy, run_id, shape.steps, shape.approve_after)
    await wait_for_row(conn, "SELECT 1 FROM peer_events WHERE run_id = $1 AND step = $2",
                       run_id, shape.approve_after)
    await asyncio.sleep(HUMAN_PAUSE_S)  # let it reach recv
    sent = time.time()
    await DBOS.send_async(handle.workflow_id, "approve", "approve")
    latency = await next_step_ms(conn, run_id, sent, shape)
    await handle.get_result()
    return latency


async def _converse(timed: bool) -> list[tuple[float, float]]:
    """One conversation; per turn, message → answer and message → first model request."""
    handle: Any = await DBOS.start_workflow_async(conversation, new_run_id())
    turns = []
    for number, text in enumerate(peer_agent.MESSAGES):
        if timed:
            peer_agent.FIRST_REQUEST.reset()
        sent = time.perf_counter()
        await DBOS.send_async(handle.workflow_id, text, "message")
        await DBOS.get_event_async(handle.workflow_id, f"turn{number}", timeout_seconds=60)
        if timed:
            turns.append(((time.perf_counter() - sent) * 1000,
                          peer_agent.FIRST_REQUEST.since(sent)))
    await handle.get_result()
    return turns


async def _system_database(conn: asyncpg.Connection, url: str) -> str:
    """DBOS keeps its checkpoints in a system database of its own on the same server."""
    name = f"dbos_sys_{new_run_id().replace('-', '')[:10]}"
    await conn.execute(f'CREATE DATABASE "{name}"')
    head, sep, query = url.partition("?")
    return f"{head.rpartition('/')[0]}/{name}{sep}{query}"


if __name__ == "__main__":
    harness_main(measure)

"""The toy in LangGraph with its Postgres checkpointer (run by bench.bench_peers).

Five nodes, each writing one progress event (the checkpointer stores the state after each:
the snapshot); the gated graph interrupts after node 2 and is resumed with a Command.
"""

from __future__ import annotations

import time
from typing import Any, TypedDict

import asyncpg
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from bench.peers_common import (
    APPROVE_AFTER,
    EVENTS_TABLE,
    PHASES,
    Figures,
    Plan,
    harness_main,
    measure_toy,
    new_run_id,
    next_step_ms,
)

STEP_TIMES = "SELECT created_at FROM peer_events WHERE run_id = $1 ORDER BY step"


class ToyState(TypedDict):
    run_id: str
    phase: int


def build(pool: AsyncConnectionPool, saver: AsyncPostgresSaver, *, gated: bool) -> Any:
    graph = StateGraph(ToyState)

    def step(number: int) -> Any:
        async def node(state: ToyState) -> dict[str, int]:
            async with pool.connection() as conn:
                await conn.execute("INSERT INTO peer_events (run_id, step) VALUES (%s, %s) "
                                   "ON CONFLICT DO NOTHING", (state["run_id"], number))
            return {"phase": number}
        return node

    def approve(state: ToyState) -> dict[str, int]:
        interrupt("carry on?")
        return {}

    previous = START
    for number in range(1, PHASES + 1):
        graph.add_node(f"step{number}", step(number))
        graph.add_edge(previous, f"step{number}")
        previous = f"step{number}"
        if gated and number == APPROVE_AFTER:
            graph.add_node("approve", approve)
            graph.add_edge(previous, "approve")
            previous = "approve"
    graph.add_edge(previous, END)
    return graph.compile(checkpointer=saver)


async def measure(plan: Plan) -> list[Figures]:
    conn = await asyncpg.connect(plan.database_url)
    await conn.execute(EVENTS_TABLE)
    pool = AsyncConnectionPool(plan.database_url, max_size=plan.concurrency + 5, open=False,
                               kwargs={"autocommit": True, "prepare_threshold": 0,
                                       "row_factory": dict_row})
    await pool.open()
    saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
    await saver.setup()
    straight, gated = build(pool, saver, gated=False), build(pool, saver, gated=True)

    async def run_straight() -> str:
        run_id = new_run_id()
        await straight.ainvoke({"run_id": run_id, "phase": 0},
                               {"configurable": {"thread_id": run_id}})
        return run_id

    async def approve_one() -> float:
        run_id = new_run_id()
        config = {"configurable": {"thread_id": run_id}}
        await gated.ainvoke({"run_id": run_id, "phase": 0}, config)  # returns at the interrupt
        sent = time.time()
        await gated.ainvoke(Command(resume="approve"), config)
        return await next_step_ms(conn, run_id, sent)

    result = await measure_toy("LangGraph + Postgres checkpointer", plan, conn, STEP_TIMES,
                               run_straight=run_straight, approve_one=approve_one)
    await pool.close()
    await conn.close()
    return [result]


if __name__ == "__main__":
    harness_main(measure)

"""The toy and the validation-like shape in LangGraph with its Postgres checkpointer (run by
bench.bench_peers).

One node a step, each writing one progress event (the checkpointer stores the state after
each: the snapshot); the gated graph interrupts after its approval step and is resumed with a
Command. The agent conversation: a `create_react_agent`-shaped graph (a model node, a tools
node, back to the model until it answers, then the summary request) over the planner's model
and tools (bench.peer_agent), one thread a conversation, one `ainvoke` a message.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any, TypedDict

import asyncpg
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from bench import peer_agent
from bench.peers_common import (
    EVENTS_TABLE,
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
)

STEP_TIMES = "SELECT created_at FROM peer_events WHERE run_id = $1 ORDER BY step"


class ToyState(TypedDict):
    run_id: str
    phase: int


class AgentState(TypedDict):
    run_id: str
    step: int
    messages: list[Any]  # the conversation, as PydanticAI's JSON (bench.peer_agent)
    summary: list[Any]


INSERT = "INSERT INTO peer_events (run_id, step) VALUES (%s, %s) ON CONFLICT DO NOTHING"


async def _event(pool: AsyncConnectionPool, run_id: str, step: int) -> None:
    async with pool.connection() as conn:
        await conn.execute(INSERT, (run_id, step))


def build(pool: AsyncConnectionPool, saver: AsyncPostgresSaver, shape: Shape, *,
          gated: bool) -> Any:
    graph = StateGraph(ToyState)

    def step(number: int) -> Any:
        async def node(state: ToyState) -> dict[str, int]:
            await _event(pool, state["run_id"], number)
            return {"phase": number}
        return node

    def approve(state: ToyState) -> dict[str, int]:
        interrupt("carry on?")
        return {}

    previous = START
    for number in range(1, shape.steps + 1):
        graph.add_node(f"step{number}", step(number))
        graph.add_edge(previous, f"step{number}")
        previous = f"step{number}"
        if gated and number == shape.approve_after:
            graph.add_node("approve", approve)
            graph.add_edge(previous, "approve")
            previous = "approve"
    graph.add_edge(previous, END)
    return graph.compile(checkpointer=saver)


def build_agent(pool: AsyncConnectionPool, saver: AsyncPostgresSaver) -> Any:
    """create_react_agent's shape: model → tools → model … → (here) the summary request."""
    graph = StateGraph(AgentState)

    async def model(state: AgentState) -> dict[str, Any]:
        response = await peer_agent.model_request(state["messages"])
        await _event(pool, state["run_id"], state["step"] + 1)
        return {"messages": state["messages"] + response, "step": state["step"] + 1}

    async def tools(state: AgentState) -> dict[str, Any]:
        returned: list[Any] = []
        step = state["step"]
        for call_id, name, args in peer_agent.tool_calls(state["messages"][-1:]):
            returned += await peer_agent.call_tool(call_id, name, args)
            step += 1
            await _event(pool, state["run_id"], step)
        return {"messages": state["messages"] + returned, "step": step}

    async def summary(state: AgentState) -> dict[str, Any]:
        answer = await peer_agent.model_request(state["messages"]
                                                + peer_agent.summary_request())
        await _event(pool, state["run_id"], state["step"] + 1)
        return {"summary": answer, "step": state["step"] + 1}

    def after_model(state: AgentState) -> str:
        return "tools" if peer_agent.tool_calls(state["messages"][-1:]) else "summary"

    graph.add_node("model", model)
    graph.add_node("tools", tools)
    graph.add_node("summary", summary)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", after_model, ["tools", "summary"])
    graph.add_edge("tools", "model")
    graph.add_edge("summary", END)
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
    results = []
    for shape in (TOY, VALIDATION):
        if shape.kind in plan.kinds:
            straight = build(pool, saver, shape, gated=False)
            gated = build(pool, saver, shape, gated=True)
            results.append(await measure_shape(
                SYSTEM, shape, plan, conn, STEP_TIMES, run_straight=partial(_run, straight),
                approve_one=partial(_approve_one, conn, gated, shape)))
    if "agent" in plan.kinds:
        results.append(await measure_agent(SYSTEM, plan,
                                           converse=partial(_converse, build_agent(pool, saver))))
    await pool.close()
    await conn.close()
    return results


SYSTEM = "LangGraph + Postgres checkpointer"


async def _run(graph: Any) -> str:
    run_id = new_run_id()
    await graph.ainvoke({"run_id": run_id, "phase": 0}, {"configurable": {"thread_id": run_id}})
    return run_id


async def _approve_one(conn: asyncpg.Connection, graph: Any, shape: Shape) -> float:
    run_id = new_run_id()
    config = {"configurable": {"thread_id": run_id}}
    await graph.ainvoke({"run_id": run_id, "phase": 0}, config)  # returns at the interrupt
    sent = time.time()
    await graph.ainvoke(Command(resume="approve"), config)
    return await next_step_ms(conn, run_id, sent, shape)


async def _converse(graph: Any, timed: bool) -> list[tuple[float, float]]:
    """One conversation (a thread); per turn, message → answer and message → first request."""
    run_id = new_run_id()
    config = {"configurable": {"thread_id": run_id}}
    state: dict[str, Any] = {"run_id": run_id, "step": 0, "messages": [], "summary": []}
    turns = []
    for text in peer_agent.MESSAGES:
        if timed:
            peer_agent.FIRST_REQUEST.reset()
        sent = time.perf_counter()
        # The checkpointer holds the thread's state; the message is appended to it here, as a
        # `messages` reducer would.
        state = await graph.ainvoke({**state, "messages": state["messages"]
                                     + peer_agent.user_message(text)}, config)
        if timed:
            turns.append(((time.perf_counter() - sent) * 1000,
                          peer_agent.FIRST_REQUEST.since(sent)))
    return turns


if __name__ == "__main__":
    harness_main(measure)

"""Per-turn overhead of the durable `agent` run kind beside the same agent run in-process.

Both sides run the bundled planner (seed 003) with its offline `FunctionModel` on the same
cycle of messages (a search, a shortlist, an availability check: one tool call each). A turn
is what AgentRun does with a message: the agent's run (model request, tool call, model
request) and the summary request. The durable side is one AgentRun on a Temporal dev server
with the real read model in PostgreSQL (each model request and tool call an activity, the
turn's events, state and snapshot written); a turn is timed from the `post_message` Update to
the run waiting for the next message (its `state` query, polled every millisecond). The
in-process side calls `planner.run` twice per turn with the history carried in memory.

    python -m bench.bench_agent --turns 100
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

from pydantic_ai.messages import ModelMessage

from activities.agents import backend_named
from activities.planner.agent import planner
from bench.bench_validation import bench_database, bench_temporal, log
from bench.common import markdown_table, percentile, ratio
from contracts.agents import SUMMARY_PROMPT
from persistence.db import create_pool
from persistence.runs import create_run
from waystation.worker import build_worker
from workflows.agent import AgentRun
from workflows.agent_kind import AGENT
from workflows.agent_models import AgentInput, AgentRunInput, MessageInput

MESSAGES = ("I need a wedding venue in Bangalore for 200 guests, rustic style",
            "I like the first three",
            "Which of them are available on 2027-02-14?")
WARM_UP = 5


async def in_process(turns: int) -> list[float]:
    history: list[ModelMessage] = []
    took = []
    for turn in range(turns + WARM_UP):
        started = time.perf_counter()
        result = await planner.run(MESSAGES[turn % len(MESSAGES)], message_history=history)
        history = result.all_messages()
        await planner.run(SUMMARY_PROMPT, message_history=history)
        if turn >= WARM_UP:
            took.append((time.perf_counter() - started) * 1000)
    return took


async def durable(turns: int, address: str | None) -> list[float]:
    took = []
    async with bench_database() as url, bench_temporal(address, "default") as client:
        pool = await create_pool(url, max_size=10)
        queue = f"bench-agent-{uuid.uuid4().hex[:8]}"
        run_id = uuid.uuid4()
        run_input = AgentInput(max_turns=100_000)
        async with pool.acquire() as conn:
            await create_run(conn, run_id=run_id, kind="agent", owner="bench", group_id=None,
                             workflow_id=AGENT.workflow_id(run_id), idempotency_key=None,
                             input=run_input.model_dump(mode="json"))
        try:
            async with build_worker(client, pool, task_queue=queue,
                                    backend=backend_named("offline")):
                await client.start_workflow(
                    AgentRun.run, AgentRunInput(run_id=run_id, owner="bench", input=run_input),
                    id=AGENT.workflow_id(run_id), task_queue=queue)
                handle = client.get_workflow_handle(AGENT.workflow_id(run_id))
                await _answered(handle, 0)
                log(f"durable: {turns + WARM_UP} turns")
                for turn in range(turns + WARM_UP):
                    started = time.perf_counter()
                    await handle.execute_update(AgentRun.post_message, MessageInput(
                        text=MESSAGES[turn % len(MESSAGES)], sent_by="bench"))
                    await _answered(handle, turn + 1)
                    if turn >= WARM_UP:
                        took.append((time.perf_counter() - started) * 1000)
                await handle.terminate("benchmark over")
        finally:
            await pool.close()
    return took


async def _answered(handle, turn: int) -> None:
    while True:
        state = await handle.query(AgentRun.state)
        if state.turn == turn and state.waiting_for == "message":
            return
        await asyncio.sleep(0.001)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--temporal-address", help="an existing server (default: start one)")
    args = parser.parse_args()
    baseline = asyncio.run(in_process(args.turns))
    ours = asyncio.run(durable(args.turns, args.temporal_address))
    rows = []
    for label, pick in (("p50", statistics.median), ("p99", lambda s: percentile(s, 99))):
        rows.append([f"per turn, {label}", f"{pick(ours):.1f} ms", f"{pick(baseline):.2f} ms",
                     ratio(pick(ours), pick(baseline))])
    print(markdown_table(["figure", "durable (AgentRun)", "in-process", "ratio"], rows,
                         [False, True, True, True]))
    overhead = statistics.median(ours) - statistics.median(baseline)
    print(f"\ndurable overhead per turn (p50 difference): {overhead:.1f} ms over {args.turns} "
          "turns (3 model requests and 1 tool call a turn)")


if __name__ == "__main__":
    main()

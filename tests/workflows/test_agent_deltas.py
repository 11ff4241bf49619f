"""Live model tokens from the model-request activity (issue 43): the planner's answer and its
tool calls' arguments are published as deltas on `waystation_deltas` as they are written,
with the id the durable message carries; nothing of them stays once the turn is recorded."""

from __future__ import annotations

import json

from tests.agent_helpers import (
    SEARCH,
    deltas_heard,
    events_of,
    new_agent_run,
    shown_text,
    start_agent,
    waiting,
)


async def test_the_answer_and_the_tool_arguments_arrive_as_deltas_of_the_durable_message(
        time_env, pool, worker, task_queue):
    async with deltas_heard(pool) as notes:
        arg = await new_agent_run(pool, message=SEARCH)
        handle = await start_agent(time_env.client, arg, task_queue)
        state = await waiting(handle, turn=1)
    mine = [n for n in notes if n["run_id"] == str(arg.run_id)]
    events = await events_of(pool, arg.run_id)
    answered = next(e.output for e in events if e.type == "agent.answered")
    text = [n for n in mine if n["message_id"] == answered["message_id"]]
    assert len(text) > 3, text  # words as they came, not the answer whole
    assert "".join(n["delta"] for n in text) == answered["text"] == state.last_answer
    assert shown_text(mine, answered["message_id"]) == answered["text"]
    assert [n["at"] for n in text] == [sum(len(m["delta"]) for m in text[:i])
                                       for i in range(len(text))]
    called = next(e.output for e in events if e.type == "tool.called")
    args = [n for n in mine if n.get("call_id") == called["call_id"]]
    assert args and args[0]["tool"] == "search_vendors"
    assert json.loads("".join(n["delta"] for n in args)) == called["arguments"]
    # Each model response's durable event names its message; the summary request streams none.
    responded = [e.output.get("message_id") for e in events if e.type == "model.responded"]
    assert all(responded) and {n["message_id"] for n in mine} < set(responded)
    assert not any(n.get("reset") for n in mine)
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM message_partials WHERE run_id = $1",
                                   arg.run_id) == 0
    await handle.terminate("done")

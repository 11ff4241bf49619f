"""A LangGraph graph's run whose model is Waystation's configured OpenAI-compatible endpoint
(the stub standing in for the paid provider): the graph's model node calls
`configured_chat_model(...)`, so its requests go through real HTTP as Chat Completions, with the
graph's tool; the interrupt's gate is approved and the model's answers are the run's."""

from __future__ import annotations

import pytest
from langgraph_agent.graph import refunds_graph

from tests.agent_helpers import (
    LAMP,
    deltas_heard,
    events_of,
    refund_approved,
    refund_script,
    run_row,
    shown_text,
)
from tests.openai_stub import OpenAIStub
from tests.workflows.test_agent_openai import worker  # noqa: F401 - the configured-model worker
from waystation.kinds.agent.activities.registry import register_agent

register_agent("refunds_graph", refunds_graph, "test")


async def test_a_graph_turn_through_the_configured_openai_model(time_env, pool, worker,  # noqa: F811
                                                                task_queue, stub: OpenAIStub):
    stub.script(*refund_script("Refunded 35 EUR on A-7007."))
    arg, handle, state = await refund_approved(pool, time_env.client, task_queue, "refunds_graph")
    assert state.last_answer == "Refunded 35 EUR on A-7007."
    assert state.context_summary == "One refund: A-7007, 35 EUR."
    first, after_tool, summary = stub.requests
    assert first.body["model"] == "gpt-4o-mini"
    assert first.headers["authorization"] == "Bearer sk-test"
    assert [t["function"]["name"] for t in first.body["tools"]] == ["issue_refund"]
    assert first.user_text == LAMP
    assert '"refund_id":"rf-A-7007-35"' in after_tool.tool_results[0]
    # The stub's usage, per response (the summary's too), summed on the run.
    events = await events_of(pool, arg.run_id)
    responses = [e.output for e in events if e.type == "model.responded"]
    assert [r["model"] for r in responses] == ["gpt-4o-mini"] * 3
    assert state.usage.requests == 3 and state.usage.input_tokens > 0
    # Each priced by the worker's price table (gpt-4o-mini is in genai-prices').
    assert all(r["usage"]["cost_usd"] > 0 for r in responses)
    assert state.usage.cost_usd == pytest.approx(sum(r["usage"]["cost_usd"] for r in responses))
    row = await run_row(pool, arg.run_id)
    assert row.input_tokens == state.usage.input_tokens
    assert row.cost_usd == pytest.approx(state.usage.cost_usd)
    await handle.terminate("done")


async def test_a_graph_s_answer_is_published_as_it_is_written(time_env, pool, worker,  # noqa: F811
                                                              task_queue, stub: OpenAIStub):
    """Issue 43: the configured chat model streams; its tokens go out as deltas under the id
    the durable answer carries; the summary request publishes none."""
    stub.script(*refund_script("Refunded 35 EUR on A-7007, it is on its way back to you."))
    async with deltas_heard(pool) as notes:
        arg, handle, state = await refund_approved(pool, time_env.client, task_queue,
                                                   "refunds_graph")
    answered = next(e.output for e in await events_of(pool, arg.run_id)
                    if e.type == "agent.answered")
    mine = [n for n in notes if n["message_id"] == answered["message_id"]]
    assert len(mine) > 3
    assert shown_text(notes, answered["message_id"]) == state.last_answer == answered["text"]
    assert not [n for n in notes if n["run_id"] == str(arg.run_id)
                and "One refund" in (n.get("delta") or "")]
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM message_partials WHERE run_id = $1",
                                   arg.run_id) == 0

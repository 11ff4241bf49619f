"""An OpenAI Agents SDK agent's run whose model is Waystation's configured OpenAI-compatible
endpoint (the stub standing in for the paid provider): the agent's `configured_model(...)`
follows the worker's configuration, so the integration's model activity sends Chat Completions
over real HTTP with the agent's tool; the gate is approved and the model's answers are the
run's."""

from __future__ import annotations

import json

import pytest
from openai_agents_agent.agent import refunds_desk

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

register_agent("refunds_desk", refunds_desk, "test")


async def test_an_agents_turn_through_the_configured_openai_model(time_env, pool,
                                                                  worker,  # noqa: F811
                                                                  task_queue, stub: OpenAIStub):
    stub.script(*refund_script("Refunded 35 EUR on A-7007."))
    arg, handle, state = await refund_approved(pool, time_env.client, task_queue, "refunds_desk")
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
    # Priced in the model activity (genai-prices knows gpt-4o-mini), summed on the run.
    assert all(r["usage"]["cost_usd"] > 0 for r in responses)
    row = await run_row(pool, arg.run_id)
    assert row.input_tokens == state.usage.input_tokens
    assert state.usage.cost_usd > 0 and row.cost_usd == pytest.approx(state.usage.cost_usd)
    await handle.terminate("done")


async def test_an_agents_answer_is_published_as_it_is_written(time_env, pool,
                                                              worker,  # noqa: F811
                                                              task_queue, stub: OpenAIStub):
    """Issue 43: the model activity streams; the text and the tool call's arguments go out as
    deltas under the id the durable events carry; the summary request publishes none."""
    stub.script(*refund_script("Refunded 35 EUR on A-7007, it is on its way back to you."))
    async with deltas_heard(pool) as notes:
        arg, handle, state = await refund_approved(pool, time_env.client, task_queue,
                                                   "refunds_desk")
    events = await events_of(pool, arg.run_id)
    answered = next(e.output for e in events if e.type == "agent.answered")
    assert len([n for n in notes if n["message_id"] == answered["message_id"]]) > 3
    assert shown_text(notes, answered["message_id"]) == state.last_answer == answered["text"]
    called = next(e.output for e in events if e.type == "tool.called")
    args = [n["delta"] for n in notes if n.get("call_id") == called["call_id"]]
    assert json.loads("".join(args)) == called["arguments"]
    assert not [n for n in notes if "One refund" in (n.get("delta") or "")]
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM message_partials WHERE run_id = $1",
                                   arg.run_id) == 0

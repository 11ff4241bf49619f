"""An agent run whose model is the configured OpenAI-compatible endpoint (the stub standing in
for the paid provider): a tool call and an answer through real HTTP, usage and cost on the run
(by the worker's price overrides), the worker's model counters, and a 429 retried by Temporal."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.client import WorkflowFailureError
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from tests.agent_helpers import (
    deltas_heard,
    events_of,
    new_agent_run,
    run_row,
    shown_text,
    start_agent,
    waiting,
)
from tests.openai_stub import CallTool, Cut, Fail, OpenAIStub, Reply, Stall
from waystation.activities.agents import backend_named
from waystation.activities.agents.metered import ModelMeter
from waystation.activities.agents.prices import ModelPrice, PriceBook
from waystation.kinds.agent.activities.metering import Accounting, use_accounting
from waystation.kinds.agent.activities.model import (
    MODEL_RETRY,
    OpenAIModelConfig,
    model_config,
    use_openai_model,
)
from waystation.kinds.agent.kind import AGENT
from waystation.kinds.agent.workflow import AgentRun
from waystation.settings import Settings
from waystation.temporal_client import DATA_CONVERTER
from waystation.worker import build_worker


@pytest_asyncio.fixture
async def worker(time_env: WorkflowEnvironment, pool, task_queue,
                 stub: OpenAIStub) -> AsyncIterator[Worker]:
    settings = Settings(WAYSTATION_AGENT_BACKEND="openai", WAYSTATION_OPENAI_BASE_URL=stub.base_url,
                        WAYSTATION_OPENAI_API_KEY="sk-test", WAYSTATION_OPENAI_MODEL="gpt-4o-mini")
    use_openai_model(model_config(settings))
    try:
        async with build_worker(time_env.client, pool, task_queue=task_queue,
                                backend=backend_named("offline")) as w:
            yield w
    finally:
        use_openai_model(None)


async def test_a_turn_through_the_configured_openai_model(time_env, pool, worker, task_queue,
                                                           stub: OpenAIStub):
    stub.script(Fail(429, retry_after=0.1),
                CallTool("search_vendors", {"category": "venue", "city": "Bangalore"}),
                Reply("Old Mill Barn and Rosewood Estate fit."),
                Reply("need: a venue in Bangalore"))
    arg = await new_agent_run(pool, message="A venue in Bangalore, please")
    handle = await start_agent(time_env.client, arg, task_queue)
    state = await waiting(handle, turn=1)
    assert state.last_answer == "Old Mill Barn and Rosewood Estate fit."
    assert state.context_summary == "need: a venue in Bangalore"
    # The 429 failed the model-request activity (the SDK does not retry), and Temporal's second
    # attempt sent the same request again; then the tool's result
    # went back to the model, then the summary request.
    first, again, after_tool, summary = stub.requests
    assert first.body == again.body and first.body["model"] == "gpt-4o-mini"
    assert first.headers["authorization"] == "Bearer sk-test"
    assert [t["function"]["name"] for t in first.body["tools"]] == [
        "search_vendors", "shortlist", "check_availability", "book_vendor"]
    assert "Old Mill Barn" in after_tool.tool_results[0]
    assert "summar" in summary.user_text.lower()
    history = await handle.fetch_history()
    attempts = [e.activity_task_started_event_attributes.attempt for e in history.events
                if e.HasField("activity_task_started_event_attributes")]
    assert attempts.count(2) == 1
    events = await events_of(pool, arg.run_id)
    assert [e.output["arguments"] for e in events if e.type == "tool.called"] == [
        {"category": "venue", "city": "Bangalore"}]
    usages = [e.output["usage"] for e in events if e.type == "model.responded"]
    assert len(usages) == 3 and all(u["input_tokens"] > 0 and u["cost_usd"] > 0 for u in usages)
    row = await run_row(pool, arg.run_id)
    assert row.input_tokens == state.usage.input_tokens == sum(u["input_tokens"] for u in usages)
    assert row.cost_usd == state.usage.cost_usd > 0
    await handle.terminate("done")
    # A worker restarted on the offline configuration replays the run's history unchanged
    # (the configured model is resolved again, but the requests' results come from history).
    use_openai_model(None)
    replayer = Replayer(workflows=[AgentRun], data_converter=DATA_CONVERTER)
    await replayer.replay_workflow(await handle.fetch_history(), raise_on_replay_failure=True)


async def test_a_timed_out_request_is_retried(time_env, pool, worker, task_queue,
                                             stub: OpenAIStub):
    # The configured timeout, short here; the first request outlives it.
    use_openai_model(OpenAIModelConfig(base_url=stub.base_url, api_key="sk-test",
                                       model="gpt-4o-mini", timeout_seconds=0.5))
    stub.script(Stall(1.5), Reply("Old Mill Barn fits."), Reply("need: a venue"))
    arg = await new_agent_run(pool, message="A venue in Bangalore, please")
    handle = await start_agent(time_env.client, arg, task_queue)
    state = await waiting(handle, turn=1)
    assert state.last_answer == "Old Mill Barn fits."
    stalled, again, _ = stub.requests
    assert stalled.body == again.body
    await handle.terminate("done")


@pytest.mark.parametrize("status", [401, 404, 400])
async def test_a_refused_request_fails_the_run_without_retrying(time_env, pool, worker,
                                                               task_queue, stub: OpenAIStub,
                                                               status: int):
    # A refused key, an unknown model, a malformed request: another attempt cannot fix them.
    stub.script(Fail(status, message="Incorrect API key provided"))
    arg = await new_agent_run(pool, message="A venue in Bangalore, please")
    handle = await start_agent(time_env.client, arg, task_queue)
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    assert len(stub.requests) == 1
    row = await run_row(pool, arg.run_id)
    assert (row.status, row.stop_reason) == ("failed", "agent_error")
    assert str(status) in row.error_message and "every attempt" not in row.error_message


async def test_a_model_down_past_the_retry_bound_fails_the_run(time_env, pool, worker,
                                                               task_queue, stub: OpenAIStub):
    # MODEL_RETRY: ten attempts with backoff (time skipped), then the run ends, saying why.
    stub.script(*[Fail(503, message="overloaded")] * MODEL_RETRY.maximum_attempts)
    arg = await new_agent_run(pool, message="A venue in Bangalore, please")
    # The handle start_workflow returns skips time while its result is awaited (the backoff).
    handle = await time_env.client.start_workflow(AgentRun.run, arg, task_queue=task_queue,
                                                  id=AGENT.workflow_id(arg.run_id))
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    assert len(stub.requests) == MODEL_RETRY.maximum_attempts == 10
    row = await run_row(pool, arg.run_id)
    assert (row.status, row.stop_reason) == ("failed", "agent_error")
    assert "failed on every attempt" in row.error_message and "503" in row.error_message


async def test_cost_by_the_price_overrides_and_the_model_counters(time_env, pool, worker,
                                                                  task_queue, stub: OpenAIStub):
    # WAYSTATION_MODEL_PRICES as the worker applies it; counters on a runtime read in-process.
    buffer = MetricBuffer(1000)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    use_accounting(Accounting(PriceBook({"gpt-4o-mini": ModelPrice(input=1000, output=3000)}),
                              ModelMeter(runtime.metric_meter)))
    try:
        stub.script(Fail(503, retry_after=0.1), Reply("Old Mill Barn fits."),
                    Reply("need: a venue"))
        arg = await new_agent_run(pool, message="A venue in Bangalore, please")
        handle = await start_agent(time_env.client, arg, task_queue)
        state = await waiting(handle, turn=1)
        await handle.terminate("done")
    finally:
        use_accounting(Accounting())
    usages = [e.output["usage"] for e in await events_of(pool, arg.run_id)
              if e.type == "model.responded"]
    expected = [(u["input_tokens"] * 1000 + u["output_tokens"] * 3000) / 1e6 for u in usages]
    assert len(usages) == 2 and [u["cost_usd"] for u in usages] == pytest.approx(expected)
    row = await run_row(pool, arg.run_id)
    assert row.cost_usd == pytest.approx(sum(expected)) == state.usage.cost_usd
    counted: dict[tuple[str, str], int] = {}
    for update in buffer.retrieve_updates():
        assert update.attributes["backend"] == "agent"
        what = update.attributes.get("outcome") or update.attributes.get("direction") or ""
        key = (update.metric.name, str(what))
        counted[key] = counted.get(key, 0) + int(update.value)
    assert counted[("waystation_model_calls", "ok")] == 2
    assert counted[("waystation_model_calls", "error")] == 1  # the 503, retried
    assert counted[("waystation_model_tokens", "input")] == row.input_tokens
    assert counted[("waystation_model_tokens", "output")] == row.output_tokens
    assert counted[("waystation_model_cost_microusd", "")] == pytest.approx(
        sum(expected) * 1e6, abs=2)


async def test_a_stream_cut_mid_answer_is_retried_and_clients_drop_the_failed_attempt(
        time_env, pool, worker, task_queue, stub: OpenAIStub):
    """Issue 43: the provider drops the connection mid-answer; the retried request publishes
    a reset, then its own deltas; a client shows the retry's text only, and the durable answer
    is the retry's."""
    stub.script(Cut("Old Mill Barn is the one you want, trust me on this.", after=12),
                Reply("Rosewood Estate fits: rustic, 250 guests."), Reply("need: a venue"))
    async with deltas_heard(pool) as notes:
        arg = await new_agent_run(pool, message="A venue in Bangalore, please")
        handle = await start_agent(time_env.client, arg, task_queue)
        state = await waiting(handle, turn=1)
    answered = next(e.output for e in await events_of(pool, arg.run_id)
                    if e.type == "agent.answered")
    assert state.last_answer == answered["text"] == "Rosewood Estate fits: rustic, 250 guests."
    mine = [n for n in notes if n["message_id"] == answered["message_id"]]
    first = [n for n in mine if n["attempt"] == 1]
    assert "".join(n["delta"] for n in first).startswith("Old Mill")  # shown, then cut
    reset = next(i for i, n in enumerate(mine) if n.get("reset"))
    assert mine[reset]["attempt"] == 2 and all(n["attempt"] == 1 for n in mine[:reset])
    assert shown_text(notes, answered["message_id"]) == answered["text"]
    assert len(stub.requests) == 3
    await handle.terminate("done")

"""The OpenAI-compatible backend against a local server speaking the real protocol."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
import pytest_asyncio

from tests.openai_stub import Fail, OpenAIStub, RefuseSchema, Reply
from waystation.activities.agents import AgentRequest
from waystation.activities.agents.base import (
    INVALID_OUTPUT,
    MODEL_REFUSED,
    MODEL_UNAVAILABLE,
    ModelCallFailed,
)
from waystation.activities.agents.openai_compatible import OpenAICompatibleBackend
from waystation.activities.agents.prices import ModelPrice, PriceBook

SCHEMA = {"type": "object", "properties": {
    "segment": {"type": "string"},
    "pains": {"type": "array", "items": {"type": "object", "properties": {
        "description": {"type": "string"}, "severity": {"type": "integer"}},
        "required": ["description", "severity"]}}},
    "required": ["segment", "pains"]}
GOOD = {"segment": "clinics", "pains": [{"description": "no-shows", "severity": 4}]}


@pytest_asyncio.fixture
async def backend(stub: OpenAIStub) -> AsyncIterator[OpenAICompatibleBackend]:
    b = OpenAICompatibleBackend(base_url=stub.base_url, api_key="sk-test", model="gpt-4o-mini",
                                progress_every_seconds=0.0)
    yield b
    await b.aclose()


def request(**fields: object) -> AgentRequest:
    return AgentRequest(**{"crew": "discovery", "task": "profile", "agent": "researcher",
                           "instructions": "Profile the customer.", "output_schema": SCHEMA,
                           "schema_name": "profile", **fields})


async def test_streamed_answer_with_usage_cost_progress_and_strict_schema(stub, backend):
    stub.chunk_delay = 0.01
    stub.script(Reply("Here you go:\n```json\n" + json.dumps(GOOD) + "\n```\nAnything else?"))
    reports: list[tuple[int, str]] = []

    async def progress(pct: int, note: str) -> None:
        reports.append((pct, note))

    response = await backend.run(request(context={"brief": {"idea": "x"}}, temperature=0.2,
                                         model="gpt-4o"), progress)
    assert response.output == GOOD
    assert response.input_tokens > 0 and response.output_tokens > 0
    assert response.cost_usd > 0 and response.model == "gpt-4o"
    # The completion's id, which a batch item keeps as its session id.
    assert response.session_id == "cmpl-stub"
    assert reports and [p for p, _ in reports] == sorted({p for p, _ in reports})
    sent = stub.requests[0]
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.body["stream"] is True and sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["model"] == "gpt-4o" and sent.body["temperature"] == 0.2
    fmt = sent.body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["additionalProperties"] is False
    assert '"idea": "x"' in sent.user_text


async def test_invalid_answer_is_asked_again_once_then_fails_naming_the_field(stub, backend):
    bad = {"segment": "clinics", "pains": [{"description": "no-shows"}]}
    stub.script(Reply(json.dumps(bad)), Reply(json.dumps(GOOD)))
    assert (await backend.run(request())).output == GOOD
    reask = stub.requests[1].body["messages"]
    assert "pains.0.severity" in reask[-1]["content"] and reask[-2]["role"] == "assistant"

    stub.script(Reply("no JSON here"), Reply(json.dumps(bad)))
    with pytest.raises(ModelCallFailed) as failed:
        await backend.run(request())
    assert failed.value.type == INVALID_OUTPUT and failed.value.non_retryable
    assert "pains.0.severity" in failed.value.message
    assert failed.value.usage.cost_usd > 0 and len(stub.requests) == 4


async def test_errors_are_classified_and_honour_retry_after(stub, backend):
    stub.script(Fail(429, retry_after=7))
    with pytest.raises(ModelCallFailed) as limited:
        await backend.run(request())
    assert limited.value.type == MODEL_UNAVAILABLE and not limited.value.non_retryable
    assert limited.value.next_retry_delay == timedelta(seconds=7)

    stub.script(Fail(503))
    with pytest.raises(ModelCallFailed) as overloaded:
        await backend.run(request())
    assert not overloaded.value.non_retryable and overloaded.value.next_retry_delay is None

    for status, hint in ((401, "WAYSTATION_OPENAI_API_KEY"), (404, "model name"),
                         (403, "permissions")):
        stub.script(Fail(status, message="nope"))
        with pytest.raises(ModelCallFailed) as refused:
            await backend.run(request())
        assert refused.value.type == MODEL_REFUSED and refused.value.non_retryable
        assert f"HTTP {status}" in refused.value.message and hint in refused.value.message


async def test_timeouts_and_unreachable_servers_are_retryable(stub):
    stub.chunk_delay = 0.5
    slow = OpenAICompatibleBackend(base_url=stub.base_url, api_key=None, model="gpt-4o-mini",
                                   timeout_seconds=0.2)
    gone = OpenAICompatibleBackend(base_url="http://127.0.0.1:9/v1", api_key=None, model="m")
    try:
        for backend in (slow, gone):
            with pytest.raises(ModelCallFailed) as failed:
                await backend.run(request())
            assert failed.value.type == MODEL_UNAVAILABLE and not failed.value.non_retryable
    finally:
        await slow.aclose()
        await gone.aclose()


async def test_a_server_refusing_json_schema_gets_the_schema_in_the_prompt(stub, backend):
    stub.script(RefuseSchema(), Reply("Sure. " + json.dumps(GOOD)), Reply(json.dumps(GOOD)))
    assert (await backend.run(request())).output == GOOD
    assert "response_format" in stub.requests[0].body
    retried = stub.requests[1]
    assert "response_format" not in retried.body and '"severity"' in retried.system_text
    # Learnt: the next call does not ask for json_schema again.
    await backend.run(request())
    assert "response_format" not in stub.requests[2].body


async def test_price_overrides_and_free_text_answers(stub):
    priced = OpenAICompatibleBackend(
        base_url=stub.base_url, api_key=None, model="my-llama",
        prices=PriceBook({"my-llama": ModelPrice(input=1_000_000, output=0)}))
    try:
        stub.script(Reply("The summary is poor."))
        response = await priced.run(request(output_schema=None))
    finally:
        await priced.aclose()
    assert response.text == "The summary is poor." and response.output is None
    assert response.cost_usd == response.input_tokens > 0
    assert "response_format" not in stub.requests[0].body

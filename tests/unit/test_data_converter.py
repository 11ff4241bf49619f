"""The one data converter (waystation.temporal_client.DATA_CONVERTER): Waystation's own models
encode to the very bytes `temporalio.contrib.pydantic`'s converter gave them (so recorded and
in-flight runs replay), are decoded as strictly, and only the OpenAI Agents SDK's types get the
lenient fallback (docs/agents.md, "OpenAI Agents SDK")."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pydantic
import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from waystation.kinds.agent.models import (
    AgentCarry,
    AgentInput,
    AgentRunInput,
    AgentUsage,
    MessageInput,
)
from waystation.temporal_client import DATA_CONVERTER

RUN = AgentRunInput(
    run_id=uuid.UUID("6f1c0a52-3d4e-4b8f-9a51-0c2d9e7b1a33"), owner="priya",
    input=AgentInput(agent="planner", message="Shortlist three venues in Bangalore",
                     history_budget=50),
    carry=AgentCarry(turn=3, context_summary="Shortlisted v-1, v-2, v-3.",
                     usage=AgentUsage(requests=4, input_tokens=120, output_tokens=40),
                     recent=[{"kind": "request", "parts": []}]),
    forked_from={"run_id": "a", "snapshot": 2, "at": datetime(2026, 11, 26, tzinfo=UTC)
                 .isoformat()})


@pytest.mark.parametrize("value", [RUN, AgentRunInput(run_id=RUN.run_id, owner="rohan",
                                                      input=AgentInput()),
                                   MessageInput(text="hello?", sent_by="rohan"),
                                   {"a": [1, 2.5, None, "x"]}, "text", 7, None])
def test_waystations_values_encode_byte_identically(value: object) -> None:
    [old] = pydantic_data_converter.payload_converter.to_payloads([value])
    [new] = DATA_CONVERTER.payload_converter.to_payloads([value])
    assert new.data == old.data and dict(new.metadata) == dict(old.metadata)
    back = DATA_CONVERTER.payload_converter.from_payloads([new], [type(value)])[0] \
        if value is not None else None
    assert back == value


def test_waystations_models_are_decoded_strictly() -> None:
    [bad] = DATA_CONVERTER.payload_converter.to_payloads([{"text": 3}])
    with pytest.raises(pydantic.ValidationError):
        DATA_CONVERTER.payload_converter.from_payloads([bad], [MessageInput])


def test_the_sdks_model_input_falls_back_to_lenient_construction() -> None:
    """What strict validation refuses in the integration's `ActivityModelInput` (a function
    call item as the SDK carries it, its unset fields encoded as null: 71 validation errors)
    is built leniently, as the integration's own converter builds it."""
    invoke = pytest.importorskip("temporalio.openai_agents._invoke_model_activity")
    value = {"input": [{"content": "hello", "role": "user"},
                       {"arguments": '{"order_id": "A-1"}', "call_id": "call_1",
                        "name": "issue_refund", "type": "function_call", "id": "fc1",
                        "async_": None, "caller": None, "namespace": None,
                        "status": "completed"},
                       {"call_id": "call_1", "output": "done", "type": "function_call_output"}],
             "model_settings": {}, "tracing": 0, "model_name": "waystation:desk"}
    [payload] = DATA_CONVERTER.payload_converter.to_payloads([value])
    with pytest.raises(pydantic.ValidationError):
        pydantic_data_converter.payload_converter.from_payloads(
            [payload], [invoke.ActivityModelInput])
    [decoded] = DATA_CONVERTER.payload_converter.from_payloads(
        [payload], [invoke.ActivityModelInput])
    assert decoded["input"][1]["call_id"] == "call_1"
    assert decoded["model_name"] == "waystation:desk"

"""A PydanticAI agent's model request, streamed inside its activity so that its text and
tool-argument deltas go out live (waystation.activities.deltas), with the id its durable message
carries.

Why not the integration's `event_stream_handler`: set on `TemporalDurability`, it turns every
model request into a `model_request_stream` activity and every tool event into an activity of
its own, so every recorded run's commands would change. Streaming where the request is sent,
in the `model_request` activity the run already schedules, publishes the same deltas with the
history unchanged: the activity still returns one whole `ModelResponse`, and a replay reads it.

The message id is the model request's own (`<workflow run id>.<activity id>`: the same on every
attempt), written into the response's `metadata` (`MESSAGE_ID_KEY`), so the durable events the
workflow writes from the response (`model.responded`, `agent.answered`) carry it.
"""

from __future__ import annotations

from uuid import UUID

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.settings import ModelSettings
from temporalio import activity

from waystation.kinds.agent.contracts import SUMMARY_REQUEST
from waystation.sdk.agents import MessageStream, publishing

MESSAGE_ID_KEY = "waystation_message_id"
WORKFLOW_ID_PREFIX = "agent-"  # the agent kind's (waystation.kinds.agent.kind)


def message_id() -> str | None:
    """The running model-request activity's message id; None outside one."""
    if not activity.in_activity():
        return None
    info = activity.info()
    return f"{info.workflow_run_id}.{info.activity_id}"


def in_agent_run() -> bool:
    """Whether deltas can be published from here: an agent run's activity, and a place to
    publish to."""
    return publishing() and activity.in_activity() \
        and (activity.info().workflow_id or "").startswith(WORKFLOW_ID_PREFIX)


def message_stream(message_id: str) -> MessageStream:
    """The deltas of the running activity's model request `message_id`."""
    info = activity.info()
    return MessageStream(UUID((info.workflow_id or "").removeprefix(WORKFLOW_ID_PREFIX)),
                         message_id, info.attempt)


def streams(model: Model, messages: list[ModelMessage]) -> bool:
    """Whether a request's deltas are worth publishing: in an agent run, by a model that
    streams (a `FunctionModel` without a stream function does not), and not the summary
    request (its answer is not shown as a message)."""
    if isinstance(model, FunctionModel) and model.stream_function is None:
        return False
    latest = messages[-1] if messages else None
    prompts = [str(p.content) for p in latest.parts if isinstance(p, UserPromptPart)] \
        if isinstance(latest, ModelRequest) else []
    return in_agent_run() and not any(p.startswith(SUMMARY_REQUEST) for p in prompts)


async def streamed_request(model: Model, messages: list[ModelMessage],
                           settings: ModelSettings | None,
                           parameters: ModelRequestParameters) -> ModelResponse:
    """`model`'s response to the request, its deltas published as they arrive."""
    calls: dict[int, tuple[str, str]] = {}  # part index -> (call id, tool)
    id = message_id()
    assert id is not None, "called in a model-request activity"
    async with message_stream(id) as live, \
            model.request_stream(messages, settings, parameters) as stream:
        async for event in stream:
            if isinstance(event, PartStartEvent):
                part = event.part
                if isinstance(part, TextPart):
                    live.text(part.content)
                elif isinstance(part, ToolCallPart):
                    calls[event.index] = (part.tool_call_id, part.tool_name)
                    # The arguments so far as the model wrote them: not JSON yet, mid-call.
                    args = part.args if isinstance(part.args, str) else \
                        part.args_as_json_str() if part.args else ""
                    live.tool_args(part.tool_call_id, part.tool_name, args)
            elif isinstance(event, PartDeltaEvent):
                delta = event.delta
                if isinstance(delta, TextPartDelta):
                    live.text(delta.content_delta)
                elif isinstance(delta, ToolCallPartDelta) and event.index in calls \
                        and isinstance(delta.args_delta, str):
                    call_id, tool = calls[event.index]
                    live.tool_args(call_id, tool, delta.args_delta)
            # Each event is a sign of life: a worker that dies mid-answer is noticed by its
            # heartbeat timeout, and the request retried (with a reset) elsewhere.
            activity.heartbeat()
        return stream.get()

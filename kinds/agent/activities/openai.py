"""OpenAI Agents SDK agents as Waystation agents: what registration checks, the activities a
worker runs for them (the model calls, the tools), and the model each call is served by
(docs/agents.md, "OpenAI Agents SDK").

A registered `agents.Agent` runs inside `AgentRun` through Temporal's OpenAI Agents
integration (`temporalio-openai-agents`), its constructor pieces only, as for LangGraph: the
workflow runs the agent with the integration's `TemporalOpenAIRunner` (each model call the
activity `invoke_model_activity`), and a tool made with `activity_as_tool` is an activity of
its own. The plugin is not used: its worker-wide runner and tracing overrides have nothing to do
in Waystation's unsandboxed `AgentRun`, and its data converter is replaced by Waystation's one
(`waystation.temporal_client.DATA_CONVERTER`), which decodes the integration's payloads.

The integration names a model in the workflow by a string. Registration names each agent's own
model object (the agent's and its handoffs' agents') `waystation:<agent>:<n>`, which the model
activity's provider (`WaystationModels`) resolves on the worker: a model wrapped by
`configured_model(own)` follows WAYSTATION_AGENT_BACKEND (`openai`: Chat Completions on
WAYSTATION_OPENAI_BASE_URL), another model object is the agent's own; a model named by a string,
or none, is the configured endpoint's (that model name, else WAYSTATION_OPENAI_MODEL), or else
the OpenAI SDK's default provider. A call to a model known by name (the configured endpoint's,
the default provider's) is priced in the activity by the worker's `WAYSTATION_MODEL_PRICES`
else genai-prices and counted on its `waystation_model_*` counters (backend `agent`), and its
cost and model name travel back in the response's `raw_usage` (`COST_KEY`, `MODEL_KEY`), so the
workflow sums what the activity priced; an agent's own model object is not priced (0).

Each tool declared `needs_approval` is wrapped so that a gate's edited arguments replace the
model's for that call (`edited_arguments`): the SDK has no call for it.

Imported only when an OpenAI agent is registered, so an installation without the SDK never
imports it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    Model,
    ModelProvider,
    ModelResponse,
    OpenAIChatCompletionsModel,
)
from agents.models.openai_provider import OpenAIProvider
from agents.tool_context import ToolContext
from agents.usage import Usage
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseTextDeltaEvent,
)
from temporalio import activity
from temporalio.openai_agents import ModelActivityParameters
from temporalio.openai_agents._invoke_model_activity import ModelActivity

from waystation.kinds.agent.activities import live
from waystation.kinds.agent.activities import model as agent_model
from waystation.kinds.agent.activities.metering import count_failed, priced
from waystation.kinds.agent.activities.model import MODEL_RETRY
from waystation.kinds.agent.contracts import SUMMARY_REQUEST
from waystation.sdk import PluginError

MODEL_PREFIX = "waystation:"
# What a priced response carries back to the workflow, in its `raw_usage`.
COST_KEY, MODEL_KEY = "waystation_cost_usd", "waystation_model"
# Each model call: bounded retries (waystation.kinds.agent.activities.model.MODEL_RETRY), five
# minutes to answer, and a heartbeat (the integration's activity sends them) so that a dying
# worker's call is retried within seconds.
MODEL_ACTIVITY = ModelActivityParameters(start_to_close_timeout=timedelta(minutes=5),
                                         heartbeat_timeout=timedelta(seconds=5),
                                         retry_policy=MODEL_RETRY)


class ConfiguredModel(Model):
    """An agent's model that follows the worker's model configuration
    (`WAYSTATION_AGENT_BACKEND=openai`: the configured endpoint), else is `own`. Outside a
    Waystation worker (a plain `Runner.run`) it is `own`."""

    def __init__(self, own: Model) -> None:
        self.own = own

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return await _served(self).get_response(*args, **kwargs)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        return _served(self).stream_response(*args, **kwargs)


def configured_model(own: Model) -> ConfiguredModel:
    """`own`, unless the worker is configured for an OpenAI-compatible endpoint."""
    return ConfiguredModel(own)


@dataclasses.dataclass(frozen=True)
class OpenAIAgent:
    """A registered agent: the agent as the workflow runs it (models named by strings, approval
    tools wrapped for edits), its approval tools' schemas, and its tools' activities."""

    agent: Agent[Any]
    schemas: dict[str, dict[str, Any]]
    activities: list[Callable[..., Any]]


# Model objects by the name the workflow gives them (registration fills it).
_models: dict[str, Model] = {}
# The edited arguments of the current run's approved calls, by call id (workflow code sets it
# around each run of the agent: see `edited_arguments`).
_edits: ContextVar[dict[str, dict[str, Any]] | None] = ContextVar("waystation_openai_edits",
                                                                  default=None)


def durable_agent(name: str, agent: object, source: str) -> OpenAIAgent:
    """The registered form of an `agents.Agent`, refusing (PluginError) what no run could
    carry."""
    if not isinstance(agent, Agent):
        raise PluginError(f"{source}: agent {name!r} is a {type(agent).__qualname__}, not an "
                          "agents.Agent")
    schemas: dict[str, dict[str, Any]] = {}
    activities: dict[str, Callable[..., Any]] = {}
    converted = _convert(name, agent, source, {}, schemas, activities)
    return OpenAIAgent(agent=converted, schemas=schemas, activities=list(activities.values()))


def _convert(name: str, agent: Agent[Any], source: str, seen: dict[int, Agent[Any]],
             schemas: dict[str, dict[str, Any]],
             activities: dict[str, Callable[..., Any]]) -> Agent[Any]:
    if id(agent) in seen:
        return seen[id(agent)]
    model: str | None
    if isinstance(agent.model, Model):
        model = f"{MODEL_PREFIX}{name}:{len(seen)}"
        _models[model] = agent.model
    elif agent.model is None or isinstance(agent.model, str):
        model = agent.model
    else:
        raise PluginError(f"{source}: agent {name!r}: its model is a "
                          f"{type(agent.model).__qualname__}, neither an agents.Model nor a "
                          "model name")
    tools = []
    for tool in agent.tools:
        if callable(tool) and not isinstance(tool, FunctionTool):
            raise PluginError(f"{source}: agent {name!r}: tool {tool!r} is a function: make it "
                              "a tool (@function_tool, or activity_as_tool(...) for an "
                              "activity)")
        if isinstance(tool, FunctionTool):
            found = _activity_of(tool)
            if found is not None:
                activities[_activity_name(found)] = found
            if tool.needs_approval is not False:
                schemas[tool.name] = tool.params_json_schema
                tool = dataclasses.replace(tool, on_invoke_tool=_editable(tool.on_invoke_tool))
        tools.append(tool)
    converted = agent.clone(model=model, tools=tools)
    seen[id(agent)] = converted
    converted.handoffs = [_convert(name, h, source, seen, schemas, activities)
                          if isinstance(h, Agent) else h for h in agent.handoffs]
    return converted


def _activity_of(tool: FunctionTool) -> Callable[..., Any] | None:
    """The activity a tool made with `activity_as_tool` schedules (its definition is in the
    tool's invoker's closure), else None: a function tool, which the integration runs in the
    workflow."""
    for cell in getattr(tool.on_invoke_tool, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(value, activity._Definition):
            return value.fn
    return None


def _activity_name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__temporal_activity_definition").name)


def _editable(invoke: Callable[[ToolContext[Any], str], Awaitable[Any]]
              ) -> Callable[[ToolContext[Any], str], Awaitable[Any]]:
    async def run(context: ToolContext[Any], arguments: str) -> Any:
        edits = _edits.get() or {}
        edited = edits.get(context.tool_call_id)
        return await invoke(context, json.dumps(edited) if edited is not None else arguments)
    return run


@contextmanager
def edited_arguments(edits: dict[str, dict[str, Any]]) -> Iterator[None]:
    """Within: an approval tool's call whose id is in `edits` runs with those arguments."""
    token = _edits.set(edits)
    try:
        yield
    finally:
        _edits.reset(token)


class WaystationModels(ModelProvider):
    """The model activity's provider: the model a workflow names, resolved on the worker."""

    def get_model(self, model_name: str | None) -> Model:
        own = _models.get(model_name or "")
        if own is not None:
            return _served(own)
        config = agent_model.configured_openai_model()
        if config is not None:
            return _chat_completions(model_name or config.model)
        default = OpenAIProvider(use_responses=False).get_model(model_name)
        return PricedModel(default, model_name or str(getattr(default, "model", "")))


def _served(model: Model) -> Model:
    if not isinstance(model, ConfiguredModel):
        return model
    config = agent_model.configured_openai_model()
    return _chat_completions(config.model) if config is not None else model.own


def _chat_completions(model: str) -> Model:
    config = agent_model.configured_openai_model()
    assert config is not None
    # The client of the worker's configuration (no SDK retries: the activity retries).
    client = agent_model._client(config)
    return PricedModel(OpenAIChatCompletionsModel(model=model, openai_client=client), model)


class PricedModel(Model):
    """A model known by name, each response priced and counted by the worker's accounting."""

    def __init__(self, served: Model, name: str) -> None:
        self.served, self.name = served, name

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        try:
            if (id := _live_id(*args, **kwargs)) is not None:
                response = await _streamed(self.served, id, *args, **kwargs)
            else:
                response = await self.served.get_response(*args, **kwargs)
        except Exception:
            count_failed(self.name)
            raise
        cost = priced(self.name, response.usage.input_tokens, response.usage.output_tokens)
        said = {live.MESSAGE_ID_KEY: id} if id is not None else {}
        response.raw_usage = {**(response.raw_usage or {}), COST_KEY: cost,
                              MODEL_KEY: self.name, **said}
        return response

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        return self.served.stream_response(*args, **kwargs)


def _live_id(system_instructions: Any, input: Any, *_: Any, **__: Any) -> str | None:
    """The id a call's live tokens go under (waystation.kinds.agent.activities.live), when they are
    published: in an agent run's model activity, and not the summary request."""
    asked = input if isinstance(input, str) else next(
        (str(item.get("content")) for item in reversed(input or [])
         if isinstance(item, dict) and item.get("role") == "user"), "")
    if not live.in_agent_run() or asked.startswith(SUMMARY_REQUEST):
        return None
    return live.message_id()


async def _streamed(served: Model, id: str, *args: Any, **kwargs: Any) -> ModelResponse:
    """The model's response, streamed: its text and tool-argument deltas published as they
    arrive (issue 43), the response built from the stream's `response.completed` as the SDK's
    own streamed runs build it."""
    done = None
    calls: dict[str, tuple[str, str]] = {}  # output item id -> (call id, tool)
    settings = kwargs.get("model_settings")
    if settings is not None and settings.include_usage is None:
        # A stream tells its usage only when asked (the SDK asks OpenAI's own endpoint only).
        kwargs["model_settings"] = dataclasses.replace(settings, include_usage=True)
    async with live.message_stream(id) as stream:
        async for event in served.stream_response(*args, **kwargs):
            if isinstance(event, ResponseTextDeltaEvent):
                stream.text(event.delta)
            elif isinstance(event, ResponseOutputItemAddedEvent) \
                    and isinstance(event.item, ResponseFunctionToolCall):
                calls[event.item.id or ""] = (event.item.call_id, event.item.name)
            elif isinstance(event, ResponseFunctionCallArgumentsDeltaEvent) \
                    and event.item_id in calls:
                stream.tool_args(*calls[event.item_id], event.delta)
            elif isinstance(event, ResponseCompletedEvent):
                done = event.response
            activity.heartbeat()
    assert done is not None, "the stream ended without its response"
    usage = done.usage
    return ModelResponse(output=done.output, response_id=done.id, usage=Usage(
        requests=1, input_tokens=usage.input_tokens if usage else 0,
        output_tokens=usage.output_tokens if usage else 0,
        total_tokens=usage.total_tokens if usage else 0))


_model_activity: ModelActivity | None = None


def model_activities() -> list[Callable[..., Any]]:
    """The integration's model activity, once per worker whatever the number of agents."""
    global _model_activity
    if _model_activity is None:
        _model_activity = ModelActivity(WaystationModels())
    return [_model_activity.invoke_model_activity]


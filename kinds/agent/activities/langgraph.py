"""LangGraph graphs as agents: what registration checks, the nodes' activities, and the model a
graph's node asks Waystation for.

A registered graph's nodes become activities through `temporalio.langgraph`'s
`LangGraphPlugin`, whose constructor wraps each node of the graph's builder in place: inside a
workflow the node schedules the activity `agent__<name>.<node>`, which runs the node's
function on a worker and hands back its update, or the `interrupt()` it raised. Only that part
of the plugin is used: `AgentRun` finds its graph in this process's registry (not through the
plugin's per-run `graph()` lookup) and runs outside the sandbox, so the plugin's interceptor
and sandbox pass-through have nothing to do, and the activities are the agent kind's like a
PydanticAI agent's. Imported only when a LangGraph graph is registered, so an installation
without LangGraph never imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import LLMResult
from langgraph.graph.state import CompiledStateGraph, StateGraph
from temporalio.langgraph import LangGraphPlugin

from waystation.kinds.agent.activities import live
from waystation.kinds.agent.activities import model as agent_model
from waystation.kinds.agent.activities.metering import COST_KEY, count_failed, priced
from waystation.kinds.agent.activities.model import MODEL_RETRY
from waystation.kinds.agent.contracts import SUMMARY_REQUEST
from waystation.sdk import PluginError
from waystation.sdk.agents import MessageStream

# What a node's activity gets unless the node's metadata says otherwise: a model call's
# bounded retries (waystation.kinds.agent.activities.model.MODEL_RETRY) and time to answer.
NODE_ACTIVITY_OPTIONS: dict[str, Any] = {"start_to_close_timeout": timedelta(minutes=5),
                                         "retry_policy": MODEL_RETRY}


@dataclass(frozen=True)
class LangGraphAgent:
    """A registered graph: its builder (nodes wrapped as activities), how it was compiled, and
    its nodes' activities for the worker."""

    builder: StateGraph[Any, Any, Any, Any]
    compile_options: dict[str, Any]
    activities: list[Callable[..., Any]]


def durable_graph(name: str, graph: object, source: str) -> LangGraphAgent:
    """The registered form of a compiled graph, refusing (PluginError) what no run could carry:
    a graph not compiled, one without a `messages` channel (the conversation), or a node that
    does not say where it runs."""
    if not isinstance(graph, CompiledStateGraph):
        raise PluginError(f"{source}: agent {name!r} is a {type(graph).__qualname__}, not a "
                          "compiled StateGraph: register builder.compile()")
    builder = graph.builder
    if "messages" not in builder.channels:
        raise PluginError(f"{source}: graph {name!r} has no `messages` channel: the run "
                          "converses through it (use MessagesState, or a state with "
                          "`messages: Annotated[list[AnyMessage], add_messages]`)")
    for node, spec in builder.nodes.items():
        if "execute_in" not in (spec.metadata or {}):
            raise PluginError(f"{source}: graph {name!r} node {node!r} does not say where it "
                              "runs: add metadata={'execute_in': 'activity'} (model calls, "
                              "tools: durable and retried) or 'workflow' (deterministic code "
                              "only) to its add_node(...)")
    try:
        plugin = LangGraphPlugin(graphs={f"agent__{name}": builder},
                                 default_activity_options=NODE_ACTIVITY_OPTIONS)
    except ValueError as error:  # a LangGraph retry policy, a node that is not a function
        raise PluginError(f"{source}: graph {name!r}: {error}") from error
    return LangGraphAgent(builder=builder, activities=list(plugin.activities),
                          compile_options={"interrupt_before": graph.interrupt_before_nodes,
                                           "interrupt_after": graph.interrupt_after_nodes,
                                           "name": graph.name})


def configured_chat_model(own: BaseChatModel) -> BaseChatModel:
    """The chat model a graph's node calls: the worker's configured one
    (WAYSTATION_AGENT_BACKEND=openai: Chat Completions on WAYSTATION_OPENAI_BASE_URL), else the
    graph's own. Called inside the node's activity, so the settings read are the worker's."""
    config = agent_model.configured_openai_model()
    if config is None:
        return own
    # Imported here: only a worker configured for an OpenAI-compatible endpoint needs it.
    from langchain_openai import ChatOpenAI

    # No retries of the SDK's own: the node's activity is retried (MODEL_RETRY), each attempt
    # in the run's history.
    # Streamed, so its tokens go out as they arrive (LiveTokens); its usage then comes in the
    # stream's last chunk (stream_usage).
    return ChatOpenAI(model=config.model, base_url=config.base_url,
                      api_key=config.api_key or "api-key-not-set",
                      timeout=config.timeout_seconds, max_retries=0, streaming=True,
                      stream_usage=True,
                      callbacks=[PricedResponses(config.model), LiveTokens()])


class LiveTokens(AsyncCallbackHandler):
    """The configured model's text tokens published as they arrive (issue 43; a PydanticAI
    agent's: waystation.kinds.agent.activities.live), each call's under the id `<the node activity's
    message id>.<n>` (the node's n-th call: the same on every attempt), which the response's
    `response_metadata` carries into the run's events. The summary request is not published."""

    def __init__(self) -> None:
        self.calls = 0
        self.streams: dict[UUID, tuple[str, MessageStream]] = {}

    async def on_chat_model_start(self, serialized: dict[str, Any],
                                  messages: list[list[BaseMessage]], *, run_id: UUID,
                                  **_: Any) -> None:
        self.calls += 1
        asked = [m for batch in messages for m in batch if isinstance(m, HumanMessage)]
        if not live.in_agent_run() or (asked and str(asked[-1].content).startswith(
                SUMMARY_REQUEST)):
            return
        id = f"{live.message_id()}.{self.calls}"
        stream = live.message_stream(id)
        self.streams[run_id] = (id, await stream.__aenter__())

    async def on_llm_new_token(self, token: str | list[str | dict[str, Any]], *,
                               run_id: UUID, **_: Any) -> None:
        if (found := self.streams.get(run_id)) is not None and isinstance(token, str):
            found[1].text(token)

    async def on_llm_end(self, response: LLMResult, *, run_id: UUID, **_: Any) -> None:
        if (found := self.streams.pop(run_id, None)) is None:
            return
        id, stream = found
        for generations in response.generations:
            for generation in generations:
                if isinstance(message := getattr(generation, "message", None), AIMessage):
                    message.response_metadata[live.MESSAGE_ID_KEY] = id
        await stream.__aexit__(None, None, None)

    async def on_llm_error(self, error: BaseException, *, run_id: UUID, **_: Any) -> None:
        if (found := self.streams.pop(run_id, None)) is not None:
            await found[1].__aexit__(None, None, None)


class PricedResponses(BaseCallbackHandler):
    """Each response of the configured model priced by the worker's price table, its cost in
    the message's `response_metadata` (the node's activity result: in the run's history, so a
    worker restarted with other prices does not reprice the past), and counted on the worker's
    `waystation_model_*` counters, as a PydanticAI agent's requests are
    (waystation.kinds.agent.activities.metering)."""

    def __init__(self, model: str) -> None:
        self.model = model

    def on_llm_end(self, response: LLMResult, **_: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                if not isinstance(message, AIMessage):
                    continue
                usage = message.usage_metadata
                inputs, outputs = (usage["input_tokens"], usage["output_tokens"]) if usage \
                    else (0, 0)
                message.response_metadata[COST_KEY] = priced(self.model, inputs, outputs)

    def on_llm_error(self, error: BaseException, **_: Any) -> None:
        count_failed(self.model)

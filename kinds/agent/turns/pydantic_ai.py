"""A PydanticAI agent's turns (kinds/agent/turns/__init__.py).

A turn is one `agent.run` of the registered agent; its `TemporalDurability` capability makes
each model request and each tool call an activity, so a worker that dies mid-turn loses
nothing and no completed tool call runs again. A tool that needs approval ends the agent run
with `DeferredToolRequests`; each call is asked of `Approvals`, and the run goes on with the
answers as `DeferredToolResults`. The conversation is the agent's message history, carried
across continue-as-new as PydanticAI's own message JSON.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, RetryState

with workflow.unsafe.imports_passed_through():
    from pydantic_ai import (
        Agent,
        DeferredToolRequests,
        DeferredToolResults,
        ToolApproved,
        ToolDenied,
    )
    from pydantic_ai.exceptions import AgentRunError, UserError
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.toolsets import FunctionToolset
    from pydantic_graph import End

    from waystation.kinds.agent.activities.entities import entity_extractors, merge_entities
    from waystation.kinds.agent.activities.model import CONFIGURED_MODEL, follows_configuration
    from waystation.kinds.agent.approvals import Approvals
    from waystation.kinds.agent.contracts import SUMMARY_PROMPT
    from waystation.kinds.agent.host import AgentHost
    from waystation.kinds.agent.models import MessageInput
    from waystation.kinds.agent.transcript import (
        add_usage,
        answered_message_id,
        returned_event,
        turn_events,
    )
    from waystation.kinds.agent.turns import Priming, TurnEnd
    from waystation.sdk import EventWrite

# Runs started before configured models asked for the agent's own model (None): they replay so.
CONFIGURED_MODEL_PATCH = "agent-configured-model"
# Runs from before wrote an approved tool's result with the turn's last events, after the model
# request and the summary that follow it (issue 31): they replay so.
TOOL_RESULT_AT_ONCE_PATCH = "agent-tool-result-at-once"


class PydanticAITurns:
    """A PydanticAI agent's conversation, a turn at a time."""

    def __init__(self, agent: Any, recent: list[dict[str, Any]], host: AgentHost,
                 approvals: Approvals, priming: Priming) -> None:
        self._agent = agent
        self._host, self._approvals, self._priming = host, approvals, priming
        self._history: list[ModelMessage] = ModelMessagesTypeAdapter.validate_python(recent)
        # This turn's messages not yet written, as events.
        self._pending_events: list[EventWrite] = []
        # The tool calls of this turn whose `tool.returned` went out as they ran.
        self._returned_early: set[str] = set()

    async def take(self, message: MessageInput) -> TurnEnd:
        c = self._host.carry
        first = len(self._history)
        self._returned_early = set()
        result = await self._run_agent(message.text)
        while isinstance(result.output, DeferredToolRequests):
            self._take(result.all_messages(), first)
            first = len(self._history)
            await self._host.record(events=self._pending_events, with_state=True)
            answers = await self._answer(result.output)
            result = await self._run_agent(None, deferred=answers)
        self._take(result.all_messages(), first)
        c.last_answer = str(result.output)
        answer_id = answered_message_id(result.all_messages())
        summary = await self._run_agent(SUMMARY_PROMPT)
        # The summary request is paid for too: its response is an event after the turn's
        # messages (it is not kept in the history, so those positions stay its own).
        add_usage(c.usage, summary.new_messages())
        summary_events = turn_events(self._host.event, c.turn,
                                     len(self._history) - self._turn_start(),
                                     summary.new_messages())
        c.context_summary = str(summary.output)
        return TurnEnd([*self._pending_events, *summary_events], message_id=answer_id)

    def set_aside(self) -> None:
        self._history = []

    def recent(self, turns: int) -> list[dict[str, Any]]:
        kept: list[ModelMessage] = []
        if turns > 0:
            starts = [i for i, m in enumerate(self._history) if _person_speaks(m)]
            kept = self._history[starts[-turns]:] if len(starts) >= turns else self._history
        return ModelMessagesTypeAdapter.dump_python(kept, mode="json")

    # --- running the agent ------------------------------------------------------------

    async def _run_agent(self, prompt: str | None,
                         deferred: DeferredToolResults | None = None) -> Any:
        try:
            if deferred is not None and self._agent.event_stream_handler is None:
                return await self._run_after_gate(deferred)
            return await self._agent.run(prompt, message_history=self._history,
                                         deferred_tool_results=deferred,
                                         model=self._model(), instructions=self._priming())
        except (AgentRunError, UserError) as error:
            # The model misbehaved past its retries, or the agent is misconfigured: no retry
            # of the workflow task would help, so the run says so and ends.
            await self._host.fail(f"agent {self._host.arg.input.agent}: {_why(error)}",
                                  stop_reason="agent_error")

    async def _run_after_gate(self, deferred: DeferredToolResults) -> Any:
        """The agent run that goes on after its gates, node by node as `Agent.run` drives it
        (without an event stream handler): the approved tools run first, and their results
        are written before the model request that reads them (a local activity in the
        workflow task that got the results: no round trip more), not with the turn's end. A
        person who approved sees the result once the tool has run (issue 31)."""
        async with self._agent.iter(None, message_history=self._history,
                                    deferred_tool_results=deferred, model=self._model(),
                                    instructions=self._priming()) as run:
            node, written = run.next_node, False
            while not isinstance(node, End):
                if run.result is not None:
                    break
                if not written and Agent.is_model_request_node(node):
                    written = True
                    await self._write_returned(node.request)
                node = await run.next(node)
        assert run.result is not None, "the agent's run did not finish"
        return run.result

    async def _write_returned(self, request: ModelRequest) -> None:
        """The tools' results the request carries, written now and not again with the turn's
        events (keyed by their call ids: a replay or a retried write writes each once)."""
        returned = [part for part in request.parts
                    if isinstance(part, ToolReturnPart) and part.outcome == "success"]
        if not returned or not workflow.patched(TOOL_RESULT_AT_ONCE_PATCH):
            return
        self._returned_early.update(part.tool_call_id for part in returned)
        await self._host.record(events=[returned_event(self._host.event, self._host.carry.turn,
                                                       part) for part in returned])

    def _model(self) -> str | None:
        """The input's model, else the worker's configured one (for an agent that follows the
        configuration), else the agent's own."""
        if self._host.arg.input.model is not None:
            return self._host.arg.input.model
        if follows_configuration(self._agent) and workflow.patched(CONFIGURED_MODEL_PATCH):
            return CONFIGURED_MODEL
        return None

    # --- the turn's messages ------------------------------------------------------------

    def _take(self, messages: list[ModelMessage], first: int) -> None:
        """Keep the run's messages and queue the events of the new ones (those from `first`),
        keyed by their positions in the turn."""
        c = self._host.carry
        self._history, new = messages, messages[first:]
        add_usage(c.usage, new)
        self._keep_entities(new)
        start = first - self._turn_start()
        self._pending_events = turn_events(self._host.event, c.turn, start, new,
                                           self._returned_early)

    def _keep_entities(self, messages: list[ModelMessage]) -> None:
        """The ids the agent declares in its tools' results
        (waystation.kinds.agent.activities.entities)."""
        carry = self._host.carry
        extractors = entity_extractors(self._agent)
        for message in messages:
            for part in message.parts:
                if isinstance(part, ToolReturnPart) and part.outcome == "success" \
                        and part.tool_name in extractors:
                    carry.related_entity_ids = merge_entities(
                        carry.related_entity_ids, extractors[part.tool_name](part.content))

    def _turn_start(self) -> int:
        """Where this turn's messages begin in the history: its person's message."""
        for index in range(len(self._history) - 1, -1, -1):
            if _person_speaks(self._history[index]):
                return index
        return 0

    # --- approvals ----------------------------------------------------------------------

    async def _answer(self, requests: DeferredToolRequests) -> DeferredToolResults:
        results = DeferredToolResults()
        for call in requests.approvals:
            verdict = await self._approvals.ask(call.tool_name, call.tool_call_id,
                                                call.args_as_dict(),
                                                self._tool_schema(call.tool_name))
            results.approvals[call.tool_call_id] = \
                ToolDenied(verdict.feedback or "") if verdict.decision == "reject" else \
                ToolApproved(override_args=verdict.answer)
        for call in requests.calls:
            # Tools run outside the agent are not Waystation's to run: the model is told.
            results.calls[call.tool_call_id] = (f"{call.tool_name} runs outside this agent "
                                                "and is not available here")
        return results

    def _tool_schema(self, name: str) -> dict[str, Any]:
        for toolset in self._agent.toolsets:
            if isinstance(toolset, FunctionToolset) and name in toolset.tools:
                return toolset.tools[name].tool_def.parameters_json_schema
        # A tool the schema of which is unknown here accepts any object of arguments.
        return {"type": "object"}


def _person_speaks(message: ModelMessage) -> bool:
    """Whether the message is a person's (a turn's first)."""
    return isinstance(message, ModelRequest) and any(isinstance(p, UserPromptPart)
                                                     for p in message.parts)


def _why(error: Exception) -> str:
    """The error, saying so when it is the last of a model request's bounded retries (PydanticAI
    rebuilds the model's error from the failed activity, which is its cause)."""
    cause = error.__cause__
    if isinstance(cause, ActivityError) \
            and cause.retry_state == RetryState.MAXIMUM_ATTEMPTS_REACHED:
        return f"the model request failed on every attempt; the last: {error}"
    return str(error)

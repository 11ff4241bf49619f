"""AgentRun: a user's PydanticAI agent, LangGraph graph or OpenAI Agents SDK agent, run durably
as a conversation (issue 12, seed 003, issue 28).

A turn is one `agent.run` of the registered agent (a graph's turn:
waystation.kinds.agent.workflow_langgraph; an OpenAI agent's: waystation.kinds.agent.workflow_openai); its
`TemporalDurability` capability makes each model request and each tool call an activity,
so a worker that dies mid-turn loses nothing and no completed tool call runs again. A tool
that needs approval ends the agent run with `DeferredToolRequests`; each call becomes a
Waystation gate (approve, reject with feedback, edit the arguments), and the run goes on with
the answers as `DeferredToolResults`. After a turn the agent writes its `context_summary`, and
the run waits, at no cost, for the next `post_message` Update, for weeks if need be. Past the
history budget it continues as new at that wait, carrying the summary and the recent turns.

Not sandboxed: the agent object (model, toolsets, capability) lives in the worker process and
is found by name; PydanticAI's own workflow-side code keeps to Temporal's rules.
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, RetryState

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
    from waystation.kinds.agent.activities.registry import agent_named
    from waystation.kinds.agent.contracts import MEMBER_RETURNED, RETURNING_MEMBER, SUMMARY_PROMPT, Approval
    from waystation.kinds.agent.models import (
        AgentCarry,
        AgentRunInput,
        AgentRunResult,
        AgentState,
        MessageAccepted,
        MessageInput,
    )
    from waystation.kinds.agent.transcript import (
        add_usage,
        answered_message_id,
        returned_event,
        turn_events,
    )
    from waystation.sdk import (
        AGENT_ANSWERED,
        MESSAGE_RECEIVED,
        EventWrite,
        GateOption,
        GateSpec,
        RunWorkflow,
    )
    from waystation.sdk.workflow import NOT_WAITING_FOR_MESSAGE
    from waystation.sdk.workflow import search_attributes as sa
    from waystation.sdk.writes import RunStateWrite

if TYPE_CHECKING:
    from agents import RunResult, ToolApprovalItem
    from langgraph.types import Interrupt

    from waystation.kinds.agent.activities.registry import RegisteredAgent
    from waystation.kinds.agent.workflow_langgraph import GraphConversation
    from waystation.kinds.agent.workflow_openai import AgentConversation, Decision

# Runs started before configured models asked for the agent's own model (None): they replay so.
CONFIGURED_MODEL_PATCH = "agent-configured-model"
# Runs that got a message after a long wait before returning members were re-primed carried
# the whole transcript on: they replay so (seed 003, issue 29).
RETURNING_MEMBER_PATCH = "agent-returning-member"
# Runs from before wrote an approved tool's result with the turn's last events, after the model
# request and the summary that follow it (issue 31): they replay so.
TOOL_RESULT_AT_ONCE_PATCH = "agent-tool-result-at-once"


@workflow.defn(name="AgentRun", sandboxed=False,
               failure_exception_types=[AgentRunError, UserError])
class AgentRun(RunWorkflow):
    @workflow.init
    def __init__(self, arg: AgentRunInput) -> None:
        self._arg = arg
        self._carry = arg.carry or AgentCarry()
        registered = agent_named(arg.input.agent)
        self._agent = registered.agent
        # A graph's or an OpenAI agent's conversation; None for a PydanticAI agent, whose
        # messages are `_history`.
        self._graph = _graph_conversation(registered, self._carry.recent)
        self._openai = _openai_conversation(registered, self._carry.recent)
        self._history: list[ModelMessage] = [] \
            if self._graph is not None or self._openai is not None else \
            ModelMessagesTypeAdapter.validate_python(self._carry.recent)
        self._inbox: list[MessageInput] = []
        self._waiting_for: str | None = None
        self._pending_events: list[EventWrite] = []
        # The tool calls of this turn whose `tool.returned` went out as they ran.
        self._returned_early: set[str] = set()
        self._phase = "starting"
        self._waiting_since: datetime | None = None
        # Who came back after a gap, for the turn that re-primes them (None on other turns).
        self._returning: str | None = None
        self.init_run(arg.run_id, snapshots_taken=self._carry.snapshots)

    @workflow.run
    async def run(self, arg: AgentRunInput) -> AgentRunResult:
        if arg.carry is None:
            self.stage_start(agent=arg.input.agent, model=arg.input.model)
        elif arg.forked_from is not None:
            self.stage_start(agent=arg.input.agent, model=arg.input.model,
                             forked_from=arg.forked_from)
        return await self.lifecycle(self._converse)

    async def _converse(self) -> AgentRunResult:
        c, inp = self._carry, self._arg.input
        if self._arg.carry is None and inp.message:
            self._inbox.append(self._received(MessageInput(text=inp.message,
                                                           sent_by=self._arg.owner)))
        while True:
            if not self._inbox:
                if workflow.info().get_current_history_length() > inp.history_budget \
                        or workflow.info().is_continue_as_new_suggested():
                    await self._continue_as_new()
                if not await self._wait_for_message():
                    return await self._finish("idle")
            message = self._inbox.pop(0)
            self._returning = message.sent_by if self._came_back() else None
            await self._turn(message)
            if c.turn >= inp.max_turns:
                return await self._finish("max_turns")

    # --- a turn ------------------------------------------------------------------------

    async def _turn(self, message: MessageInput) -> None:
        c = self._carry
        c.turn += 1
        self._phase = "thinking"
        self.show(f"{self._arg.input.agent} · turn {c.turn} · thinking")
        await self.record(events=self._re_prime(), with_state=True)
        if self._graph is not None:
            return await self._graph_turn(self._graph, message)
        if self._openai is not None:
            return await self._openai_turn(self._openai, message)
        first = len(self._history)
        self._returned_early = set()
        result = await self._run_agent(message.text)
        while isinstance(result.output, DeferredToolRequests):
            self._take(result.all_messages(), first)
            first = len(self._history)
            await self.record(events=self._pending_events, with_state=True)
            answers = await self._answer(result.output)
            result = await self._run_agent(None, deferred=answers)
        self._take(result.all_messages(), first)
        c.last_answer = str(result.output)
        answer_id = answered_message_id(result.all_messages())
        summary = await self._run_agent(SUMMARY_PROMPT)
        # The summary request is paid for too: its response is an event after the turn's
        # messages (it is not kept in the history, so those positions stay its own).
        add_usage(c.usage, summary.new_messages())
        summary_events = turn_events(self.event, c.turn, len(self._history) - self._turn_start(),
                                     summary.new_messages())
        c.context_summary = str(summary.output)
        await self._answered([*self._pending_events, *summary_events], message_id=answer_id)

    async def _answered(self, events: list[EventWrite], message_id: str | None = None) -> None:
        """The turn's last events, its answer and its snapshot; the answer carries the id its
        live deltas carried (`message_id`), when the model's response named one."""
        c = self._carry
        self._phase = "answered"
        said = {"message_id": message_id} if message_id else {}
        # The run's totals so far, named so that the usage trigger does not add them again.
        await self.record(events=[*events, self.event(
            f"t{c.turn}.answer", AGENT_ANSWERED, phase=c.turn, status="completed",
            output={"turn": c.turn, "text": c.last_answer, "context_summary": c.context_summary,
                    "total_usage": c.usage.model_dump(), **said})],
            snapshot=f"turn {c.turn}", with_state=True)

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
            await self.fail(f"agent {self._arg.input.agent}: {_why(error)}",
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
        await self.record(events=[returned_event(self.event, self._carry.turn, part)
                                  for part in returned])

    def _priming(self) -> str | None:
        """Re-primed after a continuation or a member's return: the summary (last, as the
        agent reads it) and the related entities stand in for the turns left behind; on the
        returning turn, the agent is told who speaks. A fork starts so too: it carries the
        source's summary, not its messages."""
        c = self._carry
        carried_on = c.continued or c.returns or self._arg.forked_from is not None
        if not carried_on or not c.context_summary:
            return None
        lines = []
        if self._returning is not None:
            lines.append(f"{RETURNING_MEMBER} {self._returning}, back after a while: greet "
                         "them by name with where things stand, then answer them.")
        if c.related_entity_ids:
            lines.append("Related entities: " + "; ".join(
                f"{kind}: {', '.join(ids)}" for kind, ids in c.related_entity_ids.items()))
        return "\n".join([*lines, f"Summary so far: {c.context_summary}"])

    def _came_back(self) -> bool:
        """Whether the message ends a wait of at least the run's return gap: a member coming
        back, whose turn starts from the summary instead of the transcript."""
        gap = self._arg.input.return_gap_seconds
        if gap is None or self._waiting_since is None or not self._carry.context_summary:
            return False
        waited = (workflow.now() - self._waiting_since).total_seconds()
        # Asked only past the gap, so a run that never waits that long records no marker.
        return waited >= gap and workflow.patched(RETURNING_MEMBER_PATCH)

    def _re_prime(self) -> list[EventWrite]:
        """For a returning member's turn: the transcript is set aside (kept in the run's
        events), and an event says whom the run re-primed and from what."""
        if self._returning is None:
            return []
        c = self._carry
        c.returns += 1
        self._history = []
        if self._graph is not None:
            self._graph.history = []
        if self._openai is not None:
            self._openai.history = []
        return [self.event(f"t{c.turn}.returned", MEMBER_RETURNED, phase=c.turn,
                           agent=self._returning, status="re-primed",
                           output={"turn": c.turn, "sent_by": self._returning,
                                   "context_summary": c.context_summary,
                                   "related_entity_ids": c.related_entity_ids})]

    def _model(self) -> str | None:
        """The input's model, else the worker's configured one (for an agent that follows the
        configuration), else the agent's own."""
        if self._arg.input.model is not None:
            return self._arg.input.model
        if follows_configuration(self._agent) and workflow.patched(CONFIGURED_MODEL_PATCH):
            return CONFIGURED_MODEL
        return None

    def _take(self, messages: list[ModelMessage], first: int) -> None:
        """Keep the run's messages and queue the events of the new ones (those from `first`),
        keyed by their positions in the turn."""
        c = self._carry
        self._history, new = messages, messages[first:]
        add_usage(c.usage, new)
        self._keep_entities(new)
        start = first - self._turn_start()
        self._pending_events = turn_events(self.event, c.turn, start, new, self._returned_early)

    def _keep_entities(self, messages: list[ModelMessage]) -> None:
        """The ids the agent declares in its tools' results (waystation.kinds.agent.activities.entities)."""
        extractors = entity_extractors(self._agent)
        for message in messages:
            for part in message.parts:
                if isinstance(part, ToolReturnPart) and part.outcome == "success" \
                        and part.tool_name in extractors:
                    self._carry.related_entity_ids = merge_entities(
                        self._carry.related_entity_ids, extractors[part.tool_name](part.content))

    def _turn_start(self) -> int:
        """Where this turn's messages begin in the history: its person's message."""
        for index in range(len(self._history) - 1, -1, -1):
            message = self._history[index]
            if isinstance(message, ModelRequest) and any(
                    isinstance(p, UserPromptPart) for p in message.parts):
                return index
        return 0

    # --- a LangGraph graph's turn (waystation.kinds.agent.workflow_langgraph) ------------------------

    async def _graph_turn(self, graph: GraphConversation, message: MessageInput) -> None:
        """The graph invoked with the person's message; each interrupt it stops at is a gate,
        and the graph resumes with every decision at once, each to its own interrupt."""
        from waystation.kinds.agent.workflow_langgraph import answer, interrupts, message_id_of

        c = self._carry
        first = len(graph.history)
        result = await self._run_graph(graph.start(f"turn-{c.turn}", message.text,
                                                   self._priming()))
        while pending := interrupts(result):
            self._take_graph(graph, result, first)
            first = len(graph.history)
            await self.record(events=self._pending_events, with_state=True)
            resume = {interrupt.id: await self._graph_decision(interrupt)
                      for interrupt in pending}
            result = await self._run_graph(graph.resume(resume))
        self._take_graph(graph, result, first)
        c.last_answer = answer(result)
        answer_id = message_id_of(result["messages"][-1]) if result["messages"] else None
        summary = await self._run_graph(graph.ask(f"summary-{c.turn}", SUMMARY_PROMPT))
        # Paid for too: its responses are events after the turn's messages, not kept.
        asked = summary["messages"][len(graph.history) + 1:]
        summary_events = self._graph_events(len(graph.history) - graph.turn_start(), asked)
        c.context_summary = answer(summary)
        await self._answered([*self._pending_events, *summary_events], message_id=answer_id)

    async def _run_graph(self, invocation: Any) -> Any:
        from langgraph.errors import GraphRecursionError

        try:
            return await invocation
        except (ActivityError, GraphRecursionError) as error:
            # A node failed past its retries, or the graph looped past its limit: the run
            # says so and ends, as for a PydanticAI agent's error.
            why = f"{error}: {error.cause}" if isinstance(error, ActivityError) else str(error)
            await self.fail(f"agent {self._arg.input.agent}: {why}", stop_reason="agent_error")

    def _take_graph(self, graph: GraphConversation, result: dict[str, Any],
                    first: int) -> None:
        graph.take(result)
        self._pending_events = self._graph_events(first - graph.turn_start(),
                                                  graph.history[first:])

    def _graph_events(self, start: int, messages: list[Any]) -> list[EventWrite]:
        from waystation.kinds.agent.workflow_langgraph import add_graph_usage, graph_events

        add_graph_usage(self._carry.usage, messages)
        return graph_events(self.event, self._carry.turn, start, messages)

    async def _graph_decision(self, interrupt: Interrupt) -> dict[str, Any]:
        """The gate an interrupt raises, and its decision as the `Approval` the graph resumes
        with (waystation.kinds.agent.contracts)."""
        from waystation.kinds.agent.workflow_langgraph import answer_schema, call_of

        tool, call_id, arguments = call_of(interrupt)
        schema = answer_schema(interrupt)
        if schema is None:
            await self.fail(f"agent {self._arg.input.agent}: an interrupt's response_schema "
                            "must be waystation.kinds.agent.langgraph.Approval[...] (or none): a gate's "
                            "decision is an Approval", stop_reason="agent_error")
        assert schema is not None
        verdict = await self._ask_approval(tool, call_id or interrupt.id, arguments, schema)
        return verdict.model_dump()

    # --- an OpenAI Agents SDK agent's turn (waystation.kinds.agent.workflow_openai) -----------------------

    async def _openai_turn(self, conversation: AgentConversation,
                           message: MessageInput) -> None:
        """The agent run on the person's message; each tool call that needs approval is a
        gate, and the run goes on from its state with every decision."""
        from waystation.kinds.agent.workflow_openai import Tripped, answer, answer_message_id, tripped_event

        c = self._carry
        seen: dict[str, int] = {}
        answer_id: str | None = None
        try:
            result = await self._run_openai(conversation.start(message.text, self._priming()))
            while result.interruptions:
                await self.record(events=self._openai_events(result, seen), with_state=True)
                decisions = [(item, await self._openai_decision(conversation, item))
                             for item in result.interruptions]
                result = await self._run_openai(conversation.resume(decisions))
        except Tripped as tripped:
            # The guardrail's verdict is the turn's answer; the conversation keeps the message.
            conversation.history.append({"role": "user", "content": message.text})
            self._pending_events = [tripped_event(self.event, c.turn, tripped)]
            c.last_answer = str(tripped)
        else:
            conversation.take(result)
            self._pending_events = self._openai_events(result, seen)
            c.last_answer = answer(result)
            answer_id = answer_message_id(result)
        try:
            summary = await self._run_openai(conversation.ask(SUMMARY_PROMPT))
        except Tripped:
            summary_events, c.context_summary = [], c.context_summary
        else:
            summary_events = self._openai_events(summary, {}, prefix="summary.")
            c.context_summary = answer(summary)
        await self._answered([*self._pending_events, *summary_events], message_id=answer_id)

    async def _run_openai(self, run: Any) -> RunResult:
        from agents.exceptions import AgentsException

        from waystation.kinds.agent.workflow_openai import Tripped

        try:
            return await run
        except Tripped:
            raise
        except (ActivityError, AgentsException) as error:
            # A model call or a tool failed past its retries, the model misbehaved, or the
            # agent looped past its turns: the run says so and ends.
            why = f"{error}: {error.cause}" if isinstance(error, ActivityError) else str(error)
            await self.fail(f"agent {self._arg.input.agent}: {why}", stop_reason="agent_error")

    def _openai_events(self, result: RunResult, seen: dict[str, int],
                       prefix: str = "") -> list[EventWrite]:
        from waystation.kinds.agent.workflow_openai import agent_events

        return agent_events(self.event, self._carry.turn, result, seen, self._carry.usage,
                            prefix)

    async def _openai_decision(self, conversation: AgentConversation,
                               item: ToolApprovalItem) -> Decision:
        """The gate a tool call that needs approval raises, and its decision as the SDK
        takes it."""
        from waystation.kinds.agent.workflow_openai import call_of

        tool, call_id, arguments = call_of(item)
        schema = conversation.agent.schemas.get(tool, {"type": "object"})
        verdict = await self._ask_approval(tool, call_id, arguments, schema)
        if verdict.decision == "reject":
            return "reject", verdict.feedback
        return verdict.decision, verdict.answer

    # --- approvals ---------------------------------------------------------------------

    async def _answer(self, requests: DeferredToolRequests) -> DeferredToolResults:
        results = DeferredToolResults()
        for call in requests.approvals:
            verdict = await self._ask_approval(call.tool_name, call.tool_call_id,
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

    async def _ask_approval(self, tool: str, call_id: str, arguments: dict[str, Any],
                            schema: dict[str, Any]) -> Approval[Any]:
        """A tool call's gate, whichever framework asks (a PydanticAI deferred call, a
        LangGraph interrupt, an OpenAI Agents SDK interruption), and the person's decision as
        an `Approval`: approve, edit (the arguments to run with) or reject (the feedback the
        model reads; an expired approval is a rejection saying so). A decision that never
        came (the gate's expiry policy fails the run) ends the run."""
        self._carry.approvals += 1
        self._waiting_for, self._phase = "approval", f"approval of {tool}"
        outcome = await self.ask_human(
            functools.partial(self._approval_gate, tool, call_id, arguments, schema,
                              self._carry.approvals),
            where=f"{self._arg.input.agent} · turn {self._carry.turn} · waiting for "
                  f"approval of `{tool}`")
        self._waiting_for, self._phase = None, "thinking"
        decision = outcome.decision
        if decision is None:
            await self.fail(f"approval of {tool} expired", stop_reason="gate_expired")
        assert decision is not None
        if outcome.status == "expired":
            return Approval[Any](decision="reject",
                                 feedback=f"nobody approved {tool} in time; it was not run")
        if outcome.status == "rejected":
            return Approval[Any](decision="reject", decided_by=decision.decided_by,
                                 feedback=decision.feedback or f"{decision.decided_by} said no")
        return Approval[Any](decision="approve" if decision.answer is None else "edit",
                             answer=decision.answer, decided_by=decision.decided_by)

    def _approval_gate(self, tool: str, call_id: str, arguments: dict[str, Any],
                       schema: dict[str, Any], number: int) -> GateSpec:
        """The request a tool call's gate shows (`_ask_approval`)."""
        inp = self._arg.input
        return GateSpec(
            checkpoint_name=f"approve_{tool.lower()}_{number}", phase=self._carry.turn,
            title=f"Allow {tool}?",
            description=(f"The {inp.agent} agent wants to call {tool} with "
                         f"{arguments}. Approve, reject with feedback (the agent is told), or "
                         "edit the arguments."),
            context={"agent": inp.agent, "turn": self._carry.turn, "tool": tool,
                     "call_id": call_id, "arguments": arguments,
                     "reason": "this tool needs a human's approval",
                     "parameters_schema": schema},
            options=[GateOption(value="approve", label="Run it"),
                     GateOption(value="reject", label="Do not run it; tell the agent why"),
                     GateOption(value="edit", label="Run it with edited arguments",
                                answer="required")],
            recommended_option="approve", answer_schema=schema, answer_initial=arguments,
            expires_in=timedelta(seconds=inp.approval_timeout_seconds),
            expiry_policy=inp.approval_expiry_policy, default_option="reject")

    def _tool_schema(self, name: str) -> dict[str, Any]:
        for toolset in self._agent.toolsets:
            if isinstance(toolset, FunctionToolset) and name in toolset.tools:
                return toolset.tools[name].tool_def.parameters_json_schema
        # A tool the schema of which is unknown here accepts any object of arguments.
        return {"type": "object"}

    # --- messages ----------------------------------------------------------------------

    async def _wait_for_message(self) -> bool:
        c = self._carry
        self._waiting_for, self._phase = "message", "waiting for a message"
        self._life.status = "paused"
        self._waiting_since = workflow.now()
        await self.record(with_state=True)
        self.show(f"{self._arg.input.agent} · turn {c.turn} · waiting for a message")
        try:
            await workflow.wait_condition(
                lambda: bool(self._inbox),
                timeout=timedelta(seconds=self._arg.input.idle_timeout_seconds),
                timeout_summary="conversation idle")
        except TimeoutError:
            return False
        self._life.status = "running"
        return True

    @workflow.update
    async def post_message(self, message: MessageInput) -> MessageAccepted:
        """A person's next message; refused unless the run waits for one."""
        if self._waiting_for != "message":  # a second message raced the first one in
            raise self._not_waiting()
        self._waiting_for = None
        accepted = self._received(message)
        await self.record(events=[self._message_event(accepted)])
        self._inbox.append(accepted)
        return MessageAccepted(number=self._carry.messages, turn=self._carry.turn + 1)

    @post_message.validator
    def _validate_post_message(self, message: MessageInput) -> None:
        if self._waiting_for != "message":
            raise self._not_waiting()

    def _not_waiting(self) -> ApplicationError:
        doing = {"approval": "waits for an approval", None: f"is {self._phase}"}
        return ApplicationError(f"the run is not waiting for a message: it "
                                f"{doing.get(self._waiting_for, 'is busy')}",
                                type=NOT_WAITING_FOR_MESSAGE, non_retryable=True)

    def _received(self, message: MessageInput) -> MessageInput:
        self._carry.messages += 1
        if self._carry.messages == 1:
            # The first message travels with run.started.
            self.stage(events=[self._message_event(message)])
        return message

    def _message_event(self, message: MessageInput) -> Any:
        n = self._carry.messages
        return self.event(f"message.{n}", MESSAGE_RECEIVED, phase=self._carry.turn + 1,
                          agent=message.sent_by, status="received",
                          output={"number": n, "text": message.text, "sent_by": message.sent_by})

    # --- continuing and ending ---------------------------------------------------------

    async def _continue_as_new(self) -> NoReturn:
        c, inp = self._carry, self._arg.input
        c.continued += 1
        if self._graph is not None:
            c.recent = self._graph.recent(inp.keep_recent_turns)
        elif self._openai is not None:
            c.recent = self._openai.recent(inp.keep_recent_turns)
        else:
            c.recent = ModelMessagesTypeAdapter.dump_python(
                self._recent(inp.keep_recent_turns), mode="json")

        def carried(snapshots: int) -> AgentRunInput:
            c.snapshots = snapshots
            # A fork's continuation is a continuation: its run.started is written already.
            return self._arg.model_copy(update={"carry": c, "forked_from": None})
        await self.continue_as_new(carried)

    def _recent(self, turns: int) -> list[ModelMessage]:
        if turns == 0:
            return []
        starts = [i for i, m in enumerate(self._history) if isinstance(m, ModelRequest)
                  and any(isinstance(p, UserPromptPart) for p in m.parts)]
        return self._history[starts[-turns]:] if len(starts) >= turns else self._history

    async def _finish(self, reason: str) -> AgentRunResult:
        c = self._carry
        self._waiting_for, self._phase = None, reason
        result = AgentRunResult(run_id=self.run_id, status="completed", stop_reason=reason,
                                turns=c.turn, usage=c.usage, context_summary=c.context_summary)
        await self.complete(result, stop_reason=reason,
                            details=f"completed · {reason} after {c.turn} turns", turns=c.turn)
        return result

    # --- the base's hooks --------------------------------------------------------------

    @workflow.query
    def state(self) -> AgentState:
        c = self._carry
        return AgentState(agent=self._arg.input.agent, model=self._arg.input.model, turn=c.turn,
                          waiting_for=self._waiting_for,
                          context_summary=c.context_summary, last_answer=c.last_answer,
                          usage=c.usage, continued=c.continued,
                          related_entity_ids=c.related_entity_ids, returns=c.returns)

    def position(self) -> tuple[int, str | None]:
        return self._carry.turn, self._phase

    def kind_state(self) -> dict[str, Any]:
        return self.state().model_dump(mode="json")

    def search_attribute_updates(self) -> list[Any]:
        # Waiting for a message is waiting for a human too (WaystationAwaitingHuman).
        life = self._life
        return [sa.STATUS.value_set(life.status),
                sa.AWAITING_HUMAN.value_set(life.waiting_on is not None
                                            or self._waiting_for is not None)]

    def _run_state(self, result: dict[str, Any] | None = None) -> RunStateWrite:
        state = super()._run_state(result)
        state.context_summary = self._carry.context_summary
        state.related_entity_ids = self._carry.related_entity_ids or None
        return state


def _graph_conversation(registered: RegisteredAgent,
                        recent: list[dict[str, Any]]) -> GraphConversation | None:
    """A graph's conversation, re-primed with the carried turns; None for a PydanticAI agent.
    Imported here: an installation without LangGraph runs PydanticAI agents only."""
    if registered.framework != "langgraph":
        return None
    from waystation.kinds.agent.workflow_langgraph import GraphConversation

    return GraphConversation(registered.agent, recent)


def _openai_conversation(registered: RegisteredAgent,
                         recent: list[dict[str, Any]]) -> AgentConversation | None:
    """An OpenAI agent's conversation, re-primed with the carried turns; None for another
    framework's. Imported here: an installation without the SDK never imports it."""
    if registered.framework != "openai_agents":
        return None
    from waystation.kinds.agent.workflow_openai import AgentConversation

    return AgentConversation(registered.agent, recent)


def _why(error: Exception) -> str:
    """The error, saying so when it is the last of a model request's bounded retries (PydanticAI
    rebuilds the model's error from the failed activity, which is its cause)."""
    cause = error.__cause__
    if isinstance(cause, ActivityError) \
            and cause.retry_state == RetryState.MAXIMUM_ATTEMPTS_REACHED:
        return f"the model request failed on every attempt; the last: {error}"
    return str(error)

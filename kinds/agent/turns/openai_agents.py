"""An OpenAI Agents SDK agent's turns (kinds/agent/turns/__init__.py; the adapter that runs the
agent through Temporal's integration and maps its items to events:
kinds/agent/workflow_openai.py).

The agent runs on the person's message; each tool call that needs approval is asked of
`Approvals`, and the run goes on from its state with every decision. A tripped guardrail's
verdict is the turn's answer.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from agents import RunResult, ToolApprovalItem
    from agents.exceptions import AgentsException

    from waystation.kinds.agent.activities.openai import OpenAIAgent
    from waystation.kinds.agent.approvals import Approvals
    from waystation.kinds.agent.contracts import SUMMARY_PROMPT
    from waystation.kinds.agent.host import AgentHost
    from waystation.kinds.agent.models import MessageInput
    from waystation.kinds.agent.turns import Priming, TurnEnd
    from waystation.kinds.agent.workflow_openai import (
        AgentConversation,
        Decision,
        Tripped,
        agent_events,
        answer,
        answer_message_id,
        call_of,
        tripped_event,
    )
    from waystation.sdk import EventWrite


class OpenAITurns:
    """An OpenAI agent's conversation, a turn at a time."""

    def __init__(self, agent: OpenAIAgent, recent: list[dict[str, Any]], host: AgentHost,
                 approvals: Approvals, priming: Priming) -> None:
        self._conversation = AgentConversation(agent, recent)
        self._host, self._approvals, self._priming = host, approvals, priming

    async def take(self, message: MessageInput) -> TurnEnd:
        conversation, c = self._conversation, self._host.carry
        seen: dict[str, int] = {}
        answer_id: str | None = None
        try:
            result = await self._run(conversation.start(message.text, self._priming()))
            while result.interruptions:
                await self._host.record(events=self._events(result, seen), with_state=True)
                decisions = [(item, await self._decision(item)) for item in result.interruptions]
                result = await self._run(conversation.resume(decisions))
        except Tripped as tripped:
            # The guardrail's verdict is the turn's answer; the conversation keeps the message.
            conversation.history.append({"role": "user", "content": message.text})
            events = [tripped_event(self._host.event, c.turn, tripped)]
            c.last_answer = str(tripped)
        else:
            conversation.take(result)
            events = self._events(result, seen)
            c.last_answer = answer(result)
            answer_id = answer_message_id(result)
        try:
            summary = await self._run(conversation.ask(SUMMARY_PROMPT))
        except Tripped:
            summary_events: list[EventWrite] = []
        else:
            summary_events = self._events(summary, {}, prefix="summary.")
            c.context_summary = answer(summary)
        return TurnEnd([*events, *summary_events], message_id=answer_id)

    def set_aside(self) -> None:
        self._conversation.history = []

    def recent(self, turns: int) -> list[dict[str, Any]]:
        return self._conversation.recent(turns)

    async def _run(self, run: Any) -> RunResult:
        try:
            return await run
        except Tripped:
            raise
        except (ActivityError, AgentsException) as error:
            # A model call or a tool failed past its retries, the model misbehaved, or the
            # agent looped past its turns: the run says so and ends.
            why = f"{error}: {error.cause}" if isinstance(error, ActivityError) else str(error)
            await self._host.fail(f"agent {self._host.arg.input.agent}: {why}",
                                  stop_reason="agent_error")

    def _events(self, result: RunResult, seen: dict[str, int],
                prefix: str = "") -> list[EventWrite]:
        c = self._host.carry
        return agent_events(self._host.event, c.turn, result, seen, c.usage, prefix)

    async def _decision(self, item: ToolApprovalItem) -> Decision:
        """The gate a tool call that needs approval raises, and its decision as the SDK
        takes it."""
        tool, call_id, arguments = call_of(item)
        schema = self._conversation.agent.schemas.get(tool, {"type": "object"})
        verdict = await self._approvals.ask(tool, call_id, arguments, schema)
        if verdict.decision == "reject":
            return "reject", verdict.feedback
        return verdict.decision, verdict.answer

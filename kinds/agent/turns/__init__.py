"""A framework's turns of an agent run, behind one small interface (`Turns`).

`AgentRun` drives a turn the same way whatever the agent's framework: it hands the person's
message to its `Turns`, which runs the agent to its answer (recording the turn's messages as
they come, and asking `Approvals` at each tool call that needs one), asks the agent for its
context summary, and returns the turn's last events for the run to write with its answer. One
module per framework, imported only for a run whose agent is of that framework (an
installation without LangGraph or the OpenAI Agents SDK never imports them):

- `pydantic_ai.py`: a PydanticAI agent (deferred tool calls).
- `langgraph.py`: a LangGraph graph (interrupts; the adapter: kinds/agent/workflow_langgraph.py).
- `openai_agents.py`: an OpenAI Agents SDK agent (interruptions; the adapter:
  kinds/agent/workflow_openai.py).

Each keeps the conversation in its framework's own messages: set aside for a returning
member's turn, and its recent turns carried across continue-as-new as JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from waystation.kinds.agent.activities.registry import RegisteredAgent
    from waystation.kinds.agent.approvals import Approvals
    from waystation.kinds.agent.host import AgentHost
    from waystation.kinds.agent.models import MessageInput
    from waystation.sdk import EventWrite

# What a turn's agent is re-primed with (`Conversation.priming`, kinds/agent/conversation.py),
# asked again before each run of the agent: a tool's result may add related entities mid-turn.
Priming = Callable[[], str | None]


@dataclass
class TurnEnd:
    """A turn's answer, told: its last events (the messages not yet written, then the summary
    request's) and the id the answer's live tokens carried, when the model named one. The
    answer and the summary themselves are in the run's carry (`last_answer`,
    `context_summary`)."""

    events: list[EventWrite]
    message_id: str | None = None


class Turns(Protocol):
    """One framework's turns of one run's conversation."""

    async def take(self, message: MessageInput) -> TurnEnd:
        """Run the agent on the person's message to its answer and its summary."""
        ...

    def set_aside(self) -> None:
        """Forget the transcript (a returning member's turn starts from the summary)."""
        ...

    def recent(self, turns: int) -> list[dict[str, Any]]:
        """The last `turns` turns, as JSON, for a continuation (`AgentCarry.recent`)."""
        ...


def turns_for(registered: RegisteredAgent, recent: list[dict[str, Any]], host: AgentHost,
              approvals: Approvals, priming: Priming) -> Turns:
    """The turns of the registered agent's framework, re-primed with the carried turns."""
    if registered.framework == "langgraph":
        from waystation.kinds.agent.turns.langgraph import GraphTurns

        return GraphTurns(registered.agent, recent, host, approvals, priming)
    if registered.framework == "openai_agents":
        from waystation.kinds.agent.turns.openai_agents import OpenAITurns

        return OpenAITurns(registered.agent, recent, host, approvals, priming)
    from waystation.kinds.agent.turns.pydantic_ai import PydanticAITurns

    return PydanticAITurns(registered.agent, recent, host, approvals, priming)

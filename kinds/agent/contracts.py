"""The agent kind's vocabulary: its transcript events and the summary request.

The summary request is a contract with the agents it runs: after each turn the run asks the
agent for its `context_summary` with a prompt that starts with `SUMMARY_REQUEST` (a real
model just follows it; the offline planner recognises it).
"""

from __future__ import annotations

from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from waystation.sdk import AGENT_ANSWERED, MESSAGE_RECEIVED, TOOL_CALLED, TOOL_RETRY, TOOL_RETURNED

SUMMARY_REQUEST = "Summarize the conversation so far"
SUMMARY_PROMPT = (f"{SUMMARY_REQUEST} in at most 80 words for a member of the group who comes "
                  "back later: what they need, what is shortlisted or booked (with ids), and "
                  "what is open.")

# A member's message after the conversation waited longer than the run's `return_gap_seconds`:
# the turn is re-primed from the summary and the related entities, not the transcript, and
# the agent is told who speaks with a line that starts so (the offline planner greets them).
RETURNING_MEMBER = "Returning member:"
MEMBER_RETURNED = "member.returned"

# The event types that make up a conversation's transcript (`GET /runs/{id}/messages`); its
# messages and answers are the core's (`waystation.contracts.events`), which AG-UI and A2A show.
MODEL_RESPONDED = "model.responded"
TRANSCRIPT_TYPES = (MESSAGE_RECEIVED, TOOL_CALLED, TOOL_RETURNED, TOOL_RETRY, AGENT_ANSWERED)


T = TypeVar("T")
# Marks the JSON Schema of an `Approval` (an interrupt's `response_schema`), so the run knows
# the interrupt asks for an approval and finds the schema of its edit under `answer`.
APPROVAL_SCHEMA_MARK = "x-waystation-approval"


class Approval(BaseModel, Generic[T]):
    """A person's decision at the gate a LangGraph `interrupt()` raised: the value the graph
    resumes with (`Command(resume=...)`). A graph asks for it with
    `interrupt({...}, response_schema=Approval[MyArguments])`, which types the edit (`answer`);
    LangGraph validates the resume value against it, so the node gets an `Approval`."""

    model_config = ConfigDict(json_schema_extra={APPROVAL_SCHEMA_MARK: True})
    decision: Literal["approve", "reject", "edit"]
    # Rejected: why, in the decider's words, for the model.
    feedback: str | None = None
    # Edited: the arguments to use instead of the proposed ones.
    answer: T | None = None
    decided_by: str | None = None

    def arguments(self, proposed: T) -> T:
        """What to run with: the edit, else what was proposed."""
        return self.answer if self.decision == "edit" and self.answer is not None else proposed

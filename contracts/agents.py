"""The `agent` run kind's vocabulary: its transcript events and the summary request.

The summary request is a contract with the agents it runs: after each turn the run asks the
agent for its `context_summary` with a prompt that starts with `SUMMARY_REQUEST` (a real
model just follows it; the offline planner recognises it).
"""

from __future__ import annotations

SUMMARY_REQUEST = "Summarize the conversation so far"
SUMMARY_PROMPT = (f"{SUMMARY_REQUEST} in at most 80 words for a member of the group who comes "
                  "back later: what they need, what is shortlisted or booked (with ids), and "
                  "what is open.")

# A member's message after the conversation waited longer than the run's `return_gap_seconds`:
# the turn is re-primed from the summary and the related entities, not the transcript, and
# the agent is told who speaks with a line that starts so (the offline planner greets them).
RETURNING_MEMBER = "Returning member:"
MEMBER_RETURNED = "member.returned"

# The event types that make up a conversation's transcript (`GET /runs/{id}/messages`).
MESSAGE_RECEIVED = "message.received"
MODEL_RESPONDED = "model.responded"
TOOL_CALLED = "tool.called"
TOOL_RETURNED = "tool.returned"
TOOL_RETRY = "tool.retry"
AGENT_ANSWERED = "agent.answered"
TRANSCRIPT_TYPES = (MESSAGE_RECEIVED, TOOL_CALLED, TOOL_RETURNED, TOOL_RETRY, AGENT_ANSWERED)

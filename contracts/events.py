"""The event vocabulary every run kind shares.

A run's life is told by the same four events whatever its kind (`run.started`, then one of
`run.completed`, `run.failed`, `run.canceled`, each carrying its `stop_reason`); gates by
`gate.opened`, (`gate.voted`, `gate.delegated`, `gate.reminded`, `gate.escalated`),
`gate.decided`, `gate.expired`. Kind-specific events (`phase.started`,
`item.failed`, `agent.node.completed`, ...) add detail between them.
"""

from __future__ import annotations

RUN_STARTED = "run.started"
RUN_COMPLETED = "run.completed"
RUN_FAILED = "run.failed"
RUN_CANCELED = "run.canceled"

GATE_OPENED = "gate.opened"
GATE_DECIDED = "gate.decided"
GATE_EXPIRED = "gate.expired"
# While a gate waits: one person's vote towards a quorum, a vote handed on, a reminder, an
# escalation to more deciders.
GATE_VOTED = "gate.voted"
GATE_DELEGATED = "gate.delegated"
GATE_REMINDED = "gate.reminded"
GATE_ESCALATED = "gate.escalated"

# A conversation, in a run of a kind that takes follow-up messages (`ApiHooks.messages`): a
# message received, the answer to it, and the tool calls between (called, returned, or retried
# with what the model was told). AG-UI shows them as the user's and the agent's messages and
# tool calls, A2A the answer.
MESSAGE_RECEIVED = "message.received"
AGENT_ANSWERED = "agent.answered"
TOOL_CALLED = "tool.called"
TOOL_RETURNED = "tool.returned"
TOOL_RETRY = "tool.retry"

# What an outbound webhook may subscribe to (one notification however many events told it).
RUN_FINISHED = "run.finished"
WEBHOOK_EVENT_TYPES = (GATE_OPENED, GATE_REMINDED, GATE_ESCALATED, GATE_DECIDED, GATE_EXPIRED,
                       RUN_FINISHED)

# The last event of a run: a stream that sends one of these ends. The legacy names are what
# batch and mobile runs wrote before the shared lifecycle; their rows are still in the table.
TERMINAL_EVENT_TYPES = frozenset({
    RUN_COMPLETED, RUN_FAILED, RUN_CANCELED,
    "job.completed", "job.failed", "job.canceled",
    "agent.run.completed", "agent.run.failed", "agent.run.canceled",
})

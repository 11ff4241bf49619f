"""Inputs, carried state, messages and results of AgentRun (issue 12, seed 003)."""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from waystation.kinds.agent.activities.registry import agent_names
    from waystation.sdk import ExpiryPolicy, RunStatus

DAY = 24 * 3600
MessageText = Field(min_length=1, max_length=20_000)
# What a run waits for from a person, besides its gates' decisions; None while it works.
WaitingFor = Literal["message", "approval"]


class AgentInput(BaseModel):
    """What `POST /runs` with kind `agent` takes."""

    model_config = ConfigDict(extra="forbid")
    agent: str = Field("planner", max_length=100, description="A registered agent's name.")
    message: str | None = Field(None, min_length=1, max_length=20_000,
                                description="The first message; without one the run starts "
                                            "by waiting for `POST /runs/{id}/messages`.")
    model: str | None = Field(None, min_length=1, max_length=200,
                              description="A PydanticAI model name (`openai:gpt-4o-mini`, ...) "
                                          "instead of the one the worker is configured with "
                                          "(WAYSTATION_AGENT_BACKEND).")
    approval_timeout_seconds: int = Field(7 * DAY, ge=1, le=365 * DAY)
    # Unanswered approvals: `default` denies the tool call (the model is told), `pause` waits
    # for a re-open, `fail` ends the run.
    approval_expiry_policy: ExpiryPolicy = "default"
    idle_timeout_seconds: int = Field(90 * DAY, ge=60, le=3650 * DAY,
                                      description="No message for this long ends the run.")
    max_turns: int = Field(1000, ge=1, le=100_000)
    # Past this many workflow-history events, the run continues as new at its next wait,
    # re-primed from its context summary plus the recent turns.
    history_budget: int = Field(2000, ge=50, le=40_000)
    keep_recent_turns: int = Field(2, ge=0, le=50)
    # Seed 003: a message after the conversation waited this long is a member coming back.
    return_gap_seconds: int | None = Field(
        3600, ge=1, le=3650 * DAY,
        description="A message after the run waited this long for one is a returning "
                    "member: that turn is re-primed from the context summary and the related "
                    "entities instead of the transcript, and the agent is told who speaks. "
                    "null: never.")

    @field_validator("agent")
    @classmethod
    def _registered(cls, name: str) -> str:
        known = agent_names()
        if name not in known:
            raise ValueError(f"unknown agent {name!r}; one of {', '.join(known)}")
        return name


class AgentUsage(BaseModel):
    """Model calls, tokens and cost, summed over the run (continuations included)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class AgentCarry(BaseModel):
    """What one run hands to its continuation."""

    turn: int = 0
    messages: int = 0
    approvals: int = 0
    snapshots: int = 0
    continued: int = 0
    context_summary: str | None = None
    # The recent turns, as PydanticAI's own message JSON (ModelMessagesTypeAdapter); a LangGraph
    # graph's, as LangChain's message dicts (messages_to_dict).
    recent: list[dict[str, Any]] = Field(default_factory=list)
    usage: AgentUsage = Field(default_factory=AgentUsage)
    last_answer: str | None = None
    # Ids the agent's declared tools returned, by kind (waystation.kinds.agent.activities.entities).
    related_entity_ids: dict[str, list[str]] = Field(default_factory=dict)
    # Turns re-primed for a returning member: from the first on, the summary primes every turn,
    # as after a continuation.
    returns: int = 0


class AgentRunInput(BaseModel):
    run_id: UUID
    owner: str
    input: AgentInput
    carry: AgentCarry | None = None
    # A fork's source (POST /runs/{id}/fork): its first run starts from `carry` (the source's
    # turns and summary at a snapshot) and names the source in `run.started`. None for every
    # other run, and for runs recorded before forks, whose histories must replay.
    forked_from: dict[str, Any] | None = None


class MessageInput(BaseModel):
    """A person's message to a waiting run (the `post_message` Update)."""

    text: str = MessageText
    sent_by: str


class MessageAccepted(BaseModel):
    number: int
    turn: int


class AgentState(BaseModel):
    """What the run shows: its snapshots and its `state` query."""

    agent: str
    model: str | None
    turn: int
    waiting_for: WaitingFor | None
    context_summary: str | None
    last_answer: str | None
    usage: AgentUsage
    continued: int
    related_entity_ids: dict[str, list[str]] = Field(default_factory=dict)
    returns: int = 0


class AgentRunResult(BaseModel):
    run_id: UUID
    status: RunStatus
    stop_reason: str
    turns: int
    usage: AgentUsage
    context_summary: str | None

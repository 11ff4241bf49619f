"""The agent-backend interface: one request in, one response out, usage always reported."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from pydantic import BaseModel, Field, model_validator
from temporalio.exceptions import ApplicationError

# ApplicationError types of a model call, told apart by the activities and the workflows.
INVALID_OUTPUT = "InvalidModelOutput"
MODEL_REFUSED = "ModelRequestRefused"
MODEL_UNAVAILABLE = "ModelUnavailable"


class Usage(BaseModel):
    """What one attempt at a model call consumed (a failed attempt's too)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    model: str = ""

    def __add__(self, other: Usage) -> Usage:
        return Usage(input_tokens=self.input_tokens + other.input_tokens,
                     output_tokens=self.output_tokens + other.output_tokens,
                     cost_usd=round(self.cost_usd + other.cost_usd, 9),
                     model=other.model or self.model)


class AgentRequest(BaseModel):
    """One task for one agent of a crew."""

    crew: str
    task: str
    agent: str
    # The user turn: what to do now.
    instructions: str
    # The role and standards of the agent (a prompt file for crew tasks, a step's `system`).
    system: str | None = None
    # Exactly the state the task reads (its grounding).
    context: dict[str, Any] = Field(default_factory=dict)
    feedback: str | None = None
    # JSON Schema the answer must match; None asks for free text.
    output_schema: dict[str, Any] | None = None
    schema_name: str = "answer"
    # Per-task overrides of the backend's defaults.
    model: str | None = None
    temperature: float | None = None
    # The batch item asked about: bookkeeping only, never sent to a model (seed 002).
    item_id: str | None = None


class AgentResponse(BaseModel):
    # The parsed answer: the schema's object, or a free-text answer's JSON object if any.
    output: dict[str, Any] | None = None
    # The answer as the model wrote it.
    text: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    model: str = ""
    # The provider's id of this answer (a completion's id, a coding agent's session), to
    # find the call again in the provider's logs; None when the backend has none.
    session_id: str | None = None
    # Files the agent created while answering (a backend that works on files reports them).
    output_files: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _text_of_output(self) -> AgentResponse:
        # A backend that only returns structure still has a text form for templates.
        if not self.text and self.output is not None:
            given = self.output.get("text")
            self.text = given if isinstance(given, str) else json.dumps(self.output)
        return self

    @property
    def usage(self) -> Usage:
        return Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                     cost_usd=self.cost_usd, model=self.model)


class ModelCallFailed(ApplicationError):
    """A model call that failed after consuming something: its usage is still recorded."""

    def __init__(self, message: str, *, type: str, usage: Usage, non_retryable: bool = False,
                 next_retry_delay: Any = None) -> None:
        # The usage travels as the error's details, so a workflow sees what a failure cost.
        super().__init__(message, usage.model_dump(), type=type, non_retryable=non_retryable,
                         next_retry_delay=next_retry_delay)
        self.usage = usage


def usage_of(error: BaseException) -> Usage:
    return error.usage if isinstance(error, ModelCallFailed) else Usage()


# A backend may report how far along it is while it works: (percent of the task, a note).
ProgressReporter = Callable[[int, str], Awaitable[None]]


class AgentBackend(Protocol):
    """A backend may also declare `in_place = True`: its calls are short and local (no
    network, no waiting), so work calling it may run as a local activity, in its workflow's
    own task (see `answers_in_place`)."""

    name: str

    async def run(self, request: AgentRequest,
                  progress: ProgressReporter | None = None) -> AgentResponse: ...

    async def aclose(self) -> None:
        """Release connections (called when the worker stops)."""


def answers_in_place(backend: object) -> bool:
    """Whether `backend` declares its calls short and local; one that does not say is not
    (a plug-in's, an HTTP provider's), and its calls run as regular activities."""
    return getattr(backend, "in_place", False) is True

"""The MCP tools' arguments, one model per tool, named as the REST API names them (`run_id`,
`kind`, `input`, `checkpoint`, `decision`, `after_seq`, ...): most are the REST request's own
model (`DecisionRequest`, `RunFilter`, `EventQuery`, ...) with the ids its path carries. Their
JSON Schemas are the tools' `inputSchema`s."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from waystation.api.queries import EventQuery, RunFilter
from waystation.api.schemas import (
    DecisionRequest,
    ForkRequest,
    GateRules,
    GroupId,
    MessageRequest,
    ProjectId,
    ReuseInProgress,
    RunName,
)


class Arguments(BaseModel):
    """A tool's arguments: unknown ones are refused, as unknown body fields are."""

    model_config = ConfigDict(extra="forbid")


RunId = Annotated[UUID, Field(description="The run's id (`run_id` of start_run, list_runs, "
                                         "list_pending_decisions).")]
# The bounds of the Idempotency-Key header (waystation.api.deps), and of a checkpoint in a path.
IdempotencyKey = Annotated[str | None, Field(
    min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$",
    description="The REST API's Idempotency-Key: the same key again answers the first call's "
                "result and applies nothing twice.")]


class NoArguments(Arguments):
    pass


class RunRef(Arguments):
    run_id: RunId


class StartRunArguments(Arguments):
    kind: str = Field(description="A registered run kind (list_run_kinds).")
    input: dict[str, Any] = Field(description="The kind's input, valid against its "
                                              "`input_schema` (list_run_kinds).")
    project_id: ProjectId = None
    group_id: GroupId = None
    gates: GateRules = None
    name: RunName = None
    reuse_in_progress: ReuseInProgress = True
    idempotency_key: IdempotencyKey = None


class ListRunsArguments(RunFilter, Arguments):
    pass


class ReadEventsArguments(EventQuery, Arguments):
    run_id: RunId


class PendingDecisionsArguments(Arguments):
    limit: int = Field(100, ge=1, le=500)  # as GET /decisions


class DecideArguments(DecisionRequest, Arguments):
    run_id: RunId
    checkpoint: str = Field(min_length=1, max_length=200, pattern=r"^[a-z0-9_]+$",
                            description="The request's `checkpoint_name`.")
    idempotency_key: IdempotencyKey = None


class ForkRunArguments(ForkRequest, Arguments):
    run_id: RunId
    idempotency_key: IdempotencyKey = None


class SendMessageArguments(MessageRequest, Arguments):
    run_id: RunId
    idempotency_key: IdempotencyKey = None

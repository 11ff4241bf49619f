"""Request and response models of batch jobs and their items."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Self
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from waystation.kinds.batch.activities.spec import STEP_NAME
from waystation.kinds.batch.models import MAX_INLINE_ITEMS
from waystation.kinds.batch.output_flags import OutputFlag
from waystation.kinds.batch.repository import JobRow, OutputRow, StatusCount, UnitRow

UnitStatus = Literal["pending", "running", "retrying", "completed", "failed"]


class JobView(BaseModel):
    job_id: UUID
    run_id: UUID
    name: str
    status: str
    error_message: str | None
    total_units: int
    max_workers: int
    counts: dict[str, int] = Field(description="Items by status.")
    cost_usd: float
    input_tokens: int
    output_tokens: int
    test_unit_id: UUID | None
    test_passed: bool | None = Field(description="Whether the test item completed: null "
                                                 "until it finished, or without one.")
    description: str | None
    metadata: dict[str, Any]
    steps: list[str]
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None

    @classmethod
    def of(cls, job: JobRow, counts: list[StatusCount]) -> JobView:
        return cls(
            job_id=job.id, run_id=job.run_id, name=job.name, status=job.status,
            error_message=job.error_message, total_units=job.total_units,
            max_workers=job.max_workers, counts={c.status: c.count for c in counts},
            cost_usd=round(sum(c.cost_usd for c in counts), 6),
            input_tokens=sum(c.input_tokens for c in counts),
            output_tokens=sum(c.output_tokens for c in counts),
            test_unit_id=job.test_unit_id, test_passed=job.test_passed,
            description=job.description, metadata=job.metadata,
            steps=[s["name"] for s in job.spec["steps"]],
            created_at=job.created_at, started_at=job.started_at,
            completed_at=job.completed_at)


class ItemView(BaseModel):
    item_id: UUID
    job_id: UUID
    ordinal: int
    status: UnitStatus
    payload: Any
    result: Any
    error: str | None
    retry_count: int
    path: list[str] = Field(description="The steps this item took, in order.")
    rendered_prompt: str | None
    conversation: list[Any]
    cost_usd: float
    input_tokens: int
    output_tokens: int
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    execution_ms: int | None
    at_step: str | None = Field(None, description="The step the item stands at: the one it "
                                                  "runs (or failed at) next, its last once "
                                                  "completed.")
    flags: list[OutputFlag] = Field(default_factory=list, description="What output checks "
                                                                  "flagged in its answers.")
    worker_id: str | None = Field(None, description="The worker that last started it (as "
                                                    "GET /workers names it).")
    assigned_at: datetime | None = Field(None, description="When that worker's slice began.")
    output_files: list[str] = Field(default_factory=list,
                                    description="Files its steps reported creating.")
    session_id: str | None = Field(None, description="The provider's id of its last answer.")

    @classmethod
    def of(cls, unit: UnitRow) -> ItemView:
        return cls(item_id=unit.id, **unit.model_dump(exclude={"id"}))


class ItemPage(BaseModel):
    items: list[ItemView]
    next_cursor: str | None


class OutputView(BaseModel):
    item_id: UUID
    step: str
    step_index: int
    output: Any
    rendered_prompt: str
    next_step: str | None
    cost_usd: float
    input_tokens: int
    output_tokens: int
    duration_ms: int | None
    created_at: datetime
    flags: list[OutputFlag] = Field(default_factory=list)

    @classmethod
    def of(cls, row: OutputRow) -> Self:
        return cls(item_id=row.unit_id, **row.model_dump(exclude={"unit_id", "executions"}))


class StepOutputView(OutputView):
    """An output read with its item's ordinal (`of` a `StepOutputRow`)."""

    ordinal: int = Field(description="The item's place in the job.")


class StepOutputPage(BaseModel):
    outputs: list[StepOutputView]
    next_cursor: str | None


class ItemOutputs(BaseModel):
    item_id: UUID
    path: list[str]
    outputs: list[OutputView]


class RerunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item_ids: list[UUID] | None = Field(None, min_length=1, max_length=MAX_INLINE_ITEMS,
                                        description="The items to run again (default: all).")
    from_step: str = Field(pattern=STEP_NAME, description="They run again from this step and "
                                                          "keep their outputs of earlier ones.")


class JobControlAccepted(BaseModel):
    job_id: UUID
    status: Literal["paused", "running"]
    in_flight: int


class OrdinalPage(BaseModel):
    """A page of a job's items (or their outputs) in item order."""

    cursor: str | None = Field(None, pattern=r"^\d{1,10}$")
    limit: int = Field(100, ge=1, le=500)


class ItemQuery(OrdinalPage):
    status: UnitStatus | None = None
    at_step: str | None = Field(None, pattern=STEP_NAME,
                                description="Only items that stand at this step now")
    flagged: bool | None = Field(None, description="Only items an output check flagged (true) "
                                                   "or did not (false)")

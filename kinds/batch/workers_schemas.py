"""The response model of GET /workers."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field

WorkerStatus = Literal["active", "idle", "gone"]


class WorkerItem(BaseModel):
    item_id: UUID
    job_id: UUID
    run_id: UUID
    ordinal: int
    assigned_at: datetime | None
    started_at: datetime | None


class WorkerView(BaseModel):
    worker_id: str = Field(description="The worker's Temporal identity (items' `worker_id`).")
    status: WorkerStatus = Field(description="`active`: polling, items running; `idle`: "
                                             "polling, none running; `gone`: no poll for "
                                             "`gone_after_seconds`.")
    last_heartbeat: datetime | None = Field(description="Its last poll of the task queue.")
    polls: list[Literal["workflow", "activity"]] = Field(
        description="The task queue's kinds of task it polls for (none once gone).")
    running: int = Field(description="Items running on it now, whoever's.")
    current_items: list[WorkerItem] = Field(
        description="Those of the running items the caller may read.")
    units_completed: int
    units_failed: int = Field(description="Items that failed for good on it.")
    total_execution_seconds: float = Field(description="Execution time of the items it "
                                                       "completed.")
    last_assigned_at: datetime | None


class WorkersView(BaseModel):
    task_queue: str
    gone_after_seconds: int
    workers: list[WorkerView]

"""Inputs, carried state and results of MobileAgentRun."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from waystation.kinds.mobile.activities.models import (
        ActionCommand,
        DriverName,
        ExploreStepResult,
    )
    from waystation.kinds.mobile.policy import ExplorationState, StopReason
    from waystation.sdk import RunStatus
    from waystation.sdk.schemas import PACKAGE_PATTERN



class MobileInput(BaseModel):
    """What `POST /runs` with kind `mobile_agent` takes."""

    model_config = ConfigDict(extra="forbid")
    app_package: str = Field(pattern=PACKAGE_PATTERN, max_length=200)
    driver: DriverName = "simulator"
    device_serial: str | None = Field(None, max_length=100)
    max_steps: int = Field(200, ge=1, le=100_000)
    policy: Literal["greedy_dfs", "random"] = "greedy_dfs"
    seed: int = 0
    # What to do before a sensitive action (purchase, sign-in, delete): ask a human, skip it,
    # or do it.
    sensitive_actions: Literal["ask", "skip", "allow"] = "ask"
    goal_activity: str | None = Field(None, max_length=200)
    max_errors: int = Field(10, ge=0, le=10_000)
    stall_steps: int = Field(150, ge=5, le=100_000)
    # History stays bounded: the run continues as new after this many steps.
    continue_as_new_every: int = Field(500, ge=5, le=10_000)
    input_text: str = Field("waystation", max_length=200)
    # False only for the benchmark's baseline: the same loop without the read model.
    persist: bool = True


class MobileCarry(BaseModel):
    """What one run hands to its continuation."""

    step: int
    snapshots: int
    errors: int
    policy: ExplorationState
    next_command: ActionCommand
    last: ExploreStepResult | None = None
    approved: list[int] = Field(default_factory=list)
    screens_seen: int = 0
    new_edges: int = 0
    discovery: list[int] = Field(default_factory=list)  # new screens per 100 steps
    started_at: datetime | None = None
    continued: int = 0
    # A fork's way back to the screen its source stood at ("from:action" edges from the launch
    # screen), walked before the policy chooses again; empty for every other run.
    route: list[str] = Field(default_factory=list)


class MobileAgentRunInput(BaseModel):
    run_id: UUID
    owner: str
    input: MobileInput
    carry: MobileCarry | None = None
    # A fork's start (POST /runs/{id}/fork); None for every other run, and for runs recorded
    # before forks, whose histories must replay.
    fork: MobileFork | None = None


class MobileRunState(BaseModel):
    """What the run shows: its snapshot per step and its `state` query."""

    run_id: UUID
    app_package: str
    step: int = 0
    screen_id: int | None = None
    activity: str | None = None
    last_action: str | None = None
    screens_seen: int = 0
    new_edges: int = 0
    errors: int = 0
    discovery: list[int] = Field(default_factory=list)
    continued: int = 0


class MobileFork(BaseModel):
    """Where a forked run starts: its source's state at a step's snapshot."""

    source_run_id: UUID
    state: MobileRunState
    forked_from: dict[str, Any]


class MobileAgentRunResult(BaseModel):
    run_id: UUID
    status: RunStatus
    stop_reason: StopReason
    steps: int
    screens_seen: int
    new_edges: int

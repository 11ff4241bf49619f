"""Inputs, state and result of a validation run (seed 000's ValidationRunState)."""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from waystation.kinds.validation.activities.outputs import (
    CustomerProfile,
    DesirabilityEvidence,
    FeasibilityEvidence,
    FitAssessment,
    FounderInterview,
    FoundersBrief,
    PivotRecommendation,
    ValidationSignal,
    ValueMap,
    ViabilityEvidence,
)
from waystation.kinds.validation.phases import CHECKPOINTS
from waystation.sdk import DecisionInput

Checkpoint = Literal[CHECKPOINTS]  # type: ignore[valid-type]
TasksMode = Literal["auto", "in_place", "activity"]


class ValidationInput(BaseModel):
    """What a user submits to start a validation run."""

    model_config = ConfigDict(extra="forbid")

    entrepreneur_input: str = Field(min_length=10, max_length=10_000,
                                    description="The idea, in the founder's words.")
    project_id: str | None = Field(None, max_length=200)
    gates: list[Checkpoint] = Field(
        default_factory=lambda: list(CHECKPOINTS)[:3], max_length=len(CHECKPOINTS),
        description="Checkpoints at which the run stops for a human decision.")
    gate_timeout_seconds: int = Field(7 * 24 * 3600, ge=1, le=90 * 24 * 3600)
    expiry_policy: Literal["pause", "fail", "default"] = Field(
        "pause", description="What an expired gate does: pause the run, fail it, or apply "
                             "the recommended option as decided by the system.")
    max_phase_retries: int = Field(2, ge=0, le=5,
                                   description="How often a rejected phase is re-run.")
    max_cost_usd: float | None = Field(
        None, gt=0, le=1_000_000,
        description="Stop at the gate raise_budget before a model call would pass this spend.")
    tasks: TasksMode = Field(
        "auto", description="How the crew tasks run: `in_place` (local activities, in the "
                            "workflow's own task: for a backend that answers at once), "
                            "`activity` (regular activities that heartbeat: for model calls "
                            "that take seconds), or `auto`, settled when the run starts by "
                            "whether the configured backend answers at once.")


class ValidationRunInput(BaseModel):
    run_id: UUID
    owner: str
    input: ValidationInput
    # A forked run's starting point (POST /runs/{id}/fork); None for every run started
    # fresh, and for every run recorded before forks existed, whose histories must replay.
    start_from: ValidationStart | None = None


class ValidationRunState(BaseModel):
    run_id: UUID
    owner: str
    project_id: str | None = None
    current_phase: int = 0
    phase_name: str = "onboarding"
    entrepreneur_input: str

    founder_interview: FounderInterview | None = None
    founders_brief: FoundersBrief | None = None
    customer_profile: CustomerProfile | None = None
    value_map: ValueMap | None = None
    fit_assessment: FitAssessment | None = None
    desirability_evidence: DesirabilityEvidence | None = None
    desirability_signal: ValidationSignal | None = None
    feasibility_evidence: FeasibilityEvidence | None = None
    feasibility_signal: ValidationSignal | None = None
    viability_evidence: ViabilityEvidence | None = None
    viability_signal: ValidationSignal | None = None
    pivot_recommendation: PivotRecommendation | None = None
    final_decision: str | None = None
    decision_rationale: str | None = None

    target_segment: str | None = None
    override_proceed: bool = False
    phase_attempts: dict[int, int] = Field(default_factory=dict)
    feedback: dict[int, str] = Field(default_factory=dict)
    decisions: list[dict[str, Any]] = Field(default_factory=list)
    # Spend of the tasks' successful attempts, as the workflow saw it (the read model's
    # run totals also count failed attempts); `max_cost_usd` may be raised at a gate.
    cost_usd: float = 0.0
    tokens: int = 0
    max_cost_usd: float | None = None
    skipped_tasks: list[str] = Field(default_factory=list)
    retry_count: int = 0


class ValidationStart(BaseModel):
    """Where a forked validation run starts: its source's state at a snapshot."""

    state: ValidationRunState
    # True when the snapshot's phase had done its work (it waited at its gate, or had just
    # completed): the fork keeps those outputs and starts at that gate. False: it re-runs the
    # phase from its first task (a snapshot taken mid-phase, at task_failed or raise_budget).
    at_gate: bool
    # The decision the fork applies to that gate first ("amend a past decision"), or None to
    # ask again.
    decision: DecisionInput | None = None
    forked_from: dict[str, Any]


class ValidationRunResult(BaseModel):
    run_id: UUID
    status: Literal["completed", "failed"]
    final_decision: str | None
    pivot_recommendation: PivotRecommendation | None = None
    error_message: str | None = None


ValidationRunInput.model_rebuild()

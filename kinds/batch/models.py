"""Inputs, state and result of a batch job workflow (seeds 002 and 004).

`BatchInput` is what a user submits; `BatchJobSpec` (waystation.kinds.batch.activities.spec) is the
same without the items: items go to Postgres, never into workflow history.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from waystation.kinds.batch.activities.spec import END, BatchJobSpec, Branch, StepDef
from waystation.kinds.batch.output_flags import OutputFlag
from waystation.sdk import DecisionInput


class KeptOutput(BaseModel):
    """An earlier step's output an item of a re-run starts with, as `item_outputs` keeps it:
    the item's pipeline follows it and never runs that step again."""

    model_config = ConfigDict(extra="forbid")
    step: str
    output: Any
    rendered_prompt: str
    next_step: str | None = None
    flags: list[OutputFlag] = Field(default_factory=list)


# Items a job takes inline (in its run's row): a bigger job reads them from `items_path`.
MAX_INLINE_ITEMS = 100_000
# A job's description and metadata live in its run's input and its jobs row, and are sent
# with every job view: bounded so neither grows without limit.
MAX_DESCRIPTION_CHARS = 4000
MAX_METADATA_BYTES = 16 * 1024


class BatchInput(BatchJobSpec):
    """What a user submits: the spec plus items inline, or `items_path`; a re-run (POST
    /jobs/{id}/rerun, /retry-failed) also names its source job and what its items keep."""

    items: list[dict[str, Any]] | None = Field(None, max_length=MAX_INLINE_ITEMS)
    retry_of: UUID | None = Field(None, description="The job whose items these are (set by "
                                                    "POST /jobs/{id}/rerun and /retry-failed).")
    rerun_from: str | None = Field(None, description="The step the items run again from; the "
                                                     "steps before it are kept.")
    kept_outputs: list[list[KeptOutput]] | None = Field(
        None, max_length=MAX_INLINE_ITEMS,
        description="Per item (in `items` order), the outputs of the steps before "
                    "`rerun_from` that it keeps.")
    # Kept with the job (jobs.description, jobs.metadata), never in workflow history.
    description: str | None = Field(None, max_length=MAX_DESCRIPTION_CHARS,
                                    description="What the job is for, in words.")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Your own data about the job, a JSON object of at "
                                          f"most {MAX_METADATA_BYTES} bytes; kept as given.")

    @field_validator("metadata")
    @classmethod
    def _bounded_metadata(cls, metadata: dict[str, Any]) -> dict[str, Any]:
        size = len(json.dumps(metadata, separators=(",", ":")).encode())
        if size > MAX_METADATA_BYTES:
            raise ValueError(f"at most {MAX_METADATA_BYTES} bytes of JSON, not {size}")
        return metadata

    @model_validator(mode="after")
    def _one_source(self) -> BatchInput:
        if (self.items is None) == (self.items_path is None):
            raise ValueError("give exactly one of items and items_path")
        return self

    @model_validator(mode="after")
    def _kept_before_rerun_step(self) -> BatchInput:
        names = [s.name for s in self.steps]
        if self.rerun_from is not None and self.rerun_from not in names:
            raise ValueError(f"rerun_from: {self.rerun_from!r} is not a step")
        if self.kept_outputs is None:
            return self
        if self.rerun_from is None or self.items is None \
                or len(self.kept_outputs) != len(self.items):
            raise ValueError("kept_outputs: one list per item of items, with rerun_from")
        earlier = names[:names.index(self.rerun_from)]
        for kept in self.kept_outputs:
            if not {k.step for k in kept} <= set(earlier):
                raise ValueError(f"kept_outputs: only steps before {self.rerun_from!r}")
        return self

    def spec(self) -> BatchJobSpec:
        return BatchJobSpec.model_validate(self.model_dump(
            exclude={"items", "retry_of", "rerun_from", "kept_outputs", "description",
                     "metadata"}))


class ItemRange(BaseModel):
    """Consecutive items not run yet: a slice's worth, or what a slice did not reach."""

    first: int
    count: int


class ItemRetry(BaseModel):
    """An item to run alone with `run_batch_item`: after a failed first attempt in a slice
    (`first_attempt` 2, after `delay_seconds`), or when its whole slice failed (1)."""

    ordinal: int
    first_attempt: int = 1
    delay_seconds: float = 0.0


class BatchProgress(BaseModel):
    """What the job workflow carries across continue-as-new."""

    total: int = 0
    next_ordinal: int = 0
    completed: int = 0
    failed: int = 0
    test_done: bool = False
    paused: bool = False
    failures_reported: int = 0
    progress_reported: int = 0
    snapshots_taken: int = 0
    rounds: int = 0
    pauses: int = 0
    # The job's spend as the activities last reported it, and its budget (as last raised).
    cost_usd: float = 0.0
    max_cost_usd: float | None = None
    # Work queued when a run stopped early to keep its history short (usually empty).
    ranges: list[ItemRange] = Field(default_factory=list)
    retries: list[ItemRetry] = Field(default_factory=list)


class BatchRunInput(BaseModel):
    run_id: UUID
    owner: str
    spec: BatchJobSpec
    progress: BatchProgress | None = None
    # Items per workflow run before it continues as new (small in tests). A run also stops
    # early, whatever this says, when its history nears its budget. 10,000 (slices of up to
    # MAX_SLICE_ITEMS, about a thousand events) measured 1.4-1.5x the items/s of 1,000 on the
    # 10,000-item benchmark: fewer activities, and no round's tail waiting for its last slices.
    round_size: int = Field(10_000, ge=1, le=100_000)
    # History events past which a run starts nothing new and continues as new (small in tests).
    history_budget: int = Field(7_000, ge=1, le=9_000)
    # A fork's (POST /runs/{id}/fork): the decision to apply to its gate of that name when it
    # opens, carried until it does; and the source, for run.started. None for every other job,
    # and for jobs recorded before forks, whose histories must replay.
    decided: DecisionInput | None = None
    forked_from: dict[str, Any] | None = None


class BatchRunResult(BaseModel):
    run_id: UUID
    status: str
    total: int
    completed: int
    failed: int


class PauseInput(BaseModel):
    requested_by: str


class PauseResult(BaseModel):
    status: str
    in_flight: int


__all__ = ["END", "MAX_INLINE_ITEMS", "BatchInput", "BatchJobSpec", "BatchProgress",
           "BatchRunInput", "BatchRunResult", "Branch", "ItemRange", "ItemRetry", "KeptOutput",
           "PauseInput", "PauseResult", "StepDef"]

"""A batch job's pipeline and settings: what the API validates and the activities run.

Validators refuse, at submit time, every branching rule that could never work (the API turns
that into a 422 naming the step), so nothing is discovered on item 5,000. Templates and branch
conditions are checked by `check_templates`, which the batch kind's start check runs in a
thread: parsing 20 templates of 50,000 characters is over a second of Python, which on the
API's event loop would stall every other request (issue 25).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from waystation.kinds.batch.activities.templates import (
    TemplateProblem,
    check_condition,
    check_template,
)
from waystation.sdk.schemas import check_user_schema

END = "end"
STEP_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"


class Branch(BaseModel):
    """`when` is a Jinja expression over item, outputs and output; the first true one wins."""

    model_config = ConfigDict(extra="forbid")
    when: str = Field(min_length=1, max_length=2000)
    goto: str = Field(description=f"A later step's name, or {END!r}.")


class StepDef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=STEP_NAME)
    template: str = Field(min_length=1, max_length=50_000)
    branches: list[Branch] = Field(default_factory=list, max_length=20)
    next: str | None = Field(None, description="Where to go when no branch matches; "
                                                "default: the following step, or end.")
    output_schema: dict[str, Any] | None = Field(
        None, description="JSON Schema the step's answer (a JSON object) must match; its "
                          "fields then read as outputs.<step>.<field>.")
    system: str | None = Field(None, max_length=50_000, description="The system prompt.")
    model: str | None = Field(None, min_length=1, max_length=200,
                              description="The model for this step (default: the worker's).")
    temperature: float | None = Field(None, ge=0, le=2)

    @field_validator("output_schema")
    @classmethod
    def _valid_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        # Refused now, not on item 5,000: a broken schema, a remote reference, a pattern the
        # linear-time engine cannot run.
        return None if schema is None else check_user_schema(schema)


class BatchJobSpec(BaseModel):
    """Everything about a job except its items."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200)
    items_path: str | None = Field(
        None, max_length=2000,
        description="A JSONL file path (or http(s) URL) the worker can read, one item a line.")
    steps: list[StepDef] = Field(min_length=1, max_length=20)
    max_workers: int = Field(4, ge=1, le=64)
    max_retries: int = Field(2, ge=0, le=10)
    retry_initial_seconds: float = Field(1.0, gt=0, le=600)
    test_first: bool = False
    failure_threshold: float = Field(
        0.25, ge=0, le=1, description="The job fails once failed items exceed this share.")
    gate_timeout_seconds: int = Field(7 * 24 * 3600, ge=1, le=90 * 24 * 3600)
    max_cost_usd: float | None = Field(
        None, gt=0, le=1_000_000,
        description="Stop at the gate raise_budget before the next slice would pass this spend.")

    @model_validator(mode="after")
    def _check_pipeline(self) -> BatchJobSpec:
        names = [s.name for s in self.steps]
        if len(set(names)) != len(names):
            raise ValueError("steps: step names must be unique")
        for index, step in enumerate(self.steps):
            later = names[index + 1:] + [END]
            # Only forward jumps: an item runs each step at most once, so no loops.
            for target in [r.goto for r in step.branches] + ([step.next] if step.next else []):
                if target not in later:
                    raise ValueError(f"step {step.name!r}: goto {target!r} must be a later "
                                     f"step or {END!r}")
        return self

    def step_named(self, name: str) -> tuple[int, StepDef]:
        for index, step in enumerate(self.steps):
            if step.name == name:
                return index, step
        raise KeyError(name)

    def default_next(self, index: int) -> str:
        step = self.steps[index]
        if step.next:
            return step.next
        return self.steps[index + 1].name if index + 1 < len(self.steps) else END


class StepTemplateRefused(ValueError):
    """A step's template or branch condition that can never work; `loc` is where in the
    job's input (`["steps", 0, "template"]`)."""

    def __init__(self, loc: list[str | int], message: str) -> None:
        super().__init__(message)
        self.loc = loc


def check_templates(spec: BatchJobSpec) -> None:
    """Refuse the first template or branch condition of `spec` that could never render
    (StepTemplateRefused naming the step). CPU work: the API runs it in a thread."""
    names = [s.name for s in spec.steps]
    for index, step in enumerate(spec.steps):
        earlier = names[:index]
        try:
            check_template(step.template, earlier_steps=earlier, all_steps=names)
        except TemplateProblem as problem:
            raise StepTemplateRefused(["steps", index, "template"],
                                      f"step {step.name!r}: template: {problem}") from None
        for number, rule in enumerate(step.branches):
            try:
                check_condition(rule.when, earlier_steps=earlier + [step.name],
                                all_steps=names)
            except TemplateProblem as problem:
                raise StepTemplateRefused(["steps", index, "branches", number, "when"],
                                          f"step {step.name!r}: branch: {problem}") from None

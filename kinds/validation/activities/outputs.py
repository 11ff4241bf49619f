"""What each validation crew task returns: seed 000's typed state, with real fields.

Every model is sent to the model as its JSON Schema and validated on the way back. Results
recorded in old workflow histories came from an untyped backend (lists of strings, a
`signal` key, criteria as a dict); `_Legacy` models lift those shapes into these, so a run
that started before outputs were typed replays and reads the same.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Strength = Literal["strong", "moderate", "weak"]
Decision = Literal["proceed", "pivot", "kill"]


class _Output(BaseModel):
    model_config = ConfigDict(extra="ignore")


def _lift(values: Any, key: str, as_field: str) -> None:
    """Turn a list of strings under `key` into objects with the string as `as_field`."""
    if isinstance(values, dict) and isinstance(values.get(key), list):
        values[key] = [{as_field: v} if isinstance(v, str) else v for v in values[key]]


class FounderInterview(_Output):
    questions_asked: int = Field(ge=0)
    themes: list[str] = Field(description="What the founder kept coming back to.")
    founder_confidence: Literal["high", "medium", "low"]
    open_questions: list[str] = Field(default_factory=list)


class SuccessCriterion(_Output):
    metric: str
    target: float


class FoundersBrief(_Output):
    idea: str
    problem_statement: str
    proposed_solution: str
    target_customers: list[str] = Field(min_length=1)
    key_assumptions: list[str] = Field(min_length=1,
                                       description="What must be true, riskiest first.")
    success_criteria: list[SuccessCriterion] = Field(default_factory=list)
    revision_note: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, values: Any) -> Any:
        criteria = values.get("success_criteria") if isinstance(values, dict) else None
        if isinstance(criteria, dict):
            values = {**values, "success_criteria": [
                {"metric": k, "target": v} for k, v in criteria.items()]}
        return values


class CustomerJob(_Output):
    description: str
    kind: Literal["functional", "social", "emotional"] = "functional"
    importance: int = Field(3, ge=1, le=5)


class Pain(_Output):
    description: str
    severity: int = Field(3, ge=1, le=5)


class Gain(_Output):
    description: str
    relevance: int = Field(3, ge=1, le=5)


class CustomerProfile(_Output):
    segment: str = Field(description="The customer segment profiled.")
    adjacent_segments: list[str] = Field(default_factory=list)
    jobs: list[CustomerJob] = Field(min_length=1)
    pains: list[Pain] = Field(min_length=1)
    gains: list[Gain] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, values: Any) -> Any:
        if isinstance(values, dict):
            values = dict(values)
            for key in ("jobs", "pains", "gains"):
                _lift(values, key, "description")
        return values


class PainReliever(_Output):
    relieves: str = Field("", description="The pain of the profile it relieves.")
    how: str


class GainCreator(_Output):
    creates: str = Field("", description="The gain of the profile it creates.")
    how: str


class ValueMap(_Output):
    products: list[str] = Field(min_length=1)
    pain_relievers: list[PainReliever] = Field(min_length=1)
    gain_creators: list[GainCreator] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, values: Any) -> Any:
        if isinstance(values, dict):
            values = dict(values)
            _lift(values, "pain_relievers", "how")
            _lift(values, "gain_creators", "how")
        return values


class FitAssessment(_Output):
    fit_score: int = Field(ge=0, le=100, description="Problem-solution fit, 0 to 100.")
    segment: str
    gaps: list[str] = Field(default_factory=list,
                            description="Pains or gains the value map leaves unaddressed.")
    alternative_segments: list[str] = Field(
        default_factory=list, description="Segments worth exploring instead, best first.")


class Experiment(_Output):
    name: str
    hypothesis: str = ""
    metric: str
    result: float
    threshold: float | None = Field(None, description="The result that counts as a pass.")
    sample_size: int | None = Field(None, ge=0)
    source: str = Field("", description="Where the number comes from.")

    @property
    def passed(self) -> bool | None:
        return None if self.threshold is None else self.result >= self.threshold


class DesirabilityEvidence(_Output):
    experiments: list[Experiment] = Field(min_length=1)
    summary: str = ""


class FeasibilityEvidence(_Output):
    experiments: list[Experiment] = Field(min_length=1)
    technical_risks: list[str] = Field(default_factory=list)
    summary: str = ""


class ViabilityEvidence(_Output):
    cac_usd: float = Field(ge=0, description="Cost to acquire a customer.")
    ltv_usd: float = Field(ge=0, description="Lifetime value of a customer.")
    ltv_cac_ratio: float = Field(ge=0)
    payback_months: float = Field(ge=0)
    assumptions: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)


class ValidationSignal(_Output):
    strength: Strength
    confidence: float = Field(ge=0, le=1)
    rationale: str = Field(description="Why, citing the evidence's numbers.")
    evidence_cited: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, values: Any) -> Any:
        if isinstance(values, dict) and "strength" not in values and "signal" in values:
            values = {**values, "strength": values["signal"]}
        return values


class PivotAlternative(_Output):
    pivot_type: Literal["customer_segment", "value_proposition", "channel", "revenue_model",
                        "technology"]
    description: str
    segment: str | None = None


class PivotRecommendation(_Output):
    decision: Decision
    pivot_type: str | None = None
    rationale: str
    alternatives: list[PivotAlternative] = Field(default_factory=list)


TASK_OUTPUTS: dict[str, type[BaseModel]] = {
    "interview_founder": FounderInterview,
    "draft_founders_brief": FoundersBrief,
    "profile_customer_segment": CustomerProfile,
    "design_value_map": ValueMap,
    "assess_fit": FitAssessment,
    "run_desirability_experiments": DesirabilityEvidence,
    "assess_technical_feasibility": FeasibilityEvidence,
    "model_unit_economics": ViabilityEvidence,
    "judge_desirability": ValidationSignal,
    "judge_feasibility": ValidationSignal,
    "judge_viability": ValidationSignal,
    "recommend_pivot": PivotRecommendation,
}

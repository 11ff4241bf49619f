"""The five phases of a validation run, their crews' tasks, and the gates between them."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

CHECKPOINTS = ("approve_founders_brief", "approve_vpc_completion",
               "approve_desirability_gate", "approve_feasibility_gate",
               "approve_viability_gate")


def phase_completed(number: int) -> str:
    """The label of the snapshot taken when phase `number` has done its work."""
    return f"phase {number} completed"


class TaskDef(BaseModel):
    crew: str
    task: str
    agent: str
    # The user turn; the role and standards are in the task's prompt file.
    instructions: str
    # The state field this task's output fills.
    fills: str
    # The state fields the task is grounded in: its context holds exactly these.
    reads: list[str] = Field(default_factory=list)
    # Whether the run may go on without this task's output (a human may `skip` it).
    skippable: bool = False
    model: str | None = None
    temperature: float | None = None


class PhaseDef(BaseModel):
    number: int
    name: str
    tasks: list[TaskDef]
    checkpoint: str


PHASES: list[PhaseDef] = [
    PhaseDef(number=0, name="onboarding", checkpoint=CHECKPOINTS[0], tasks=[
        TaskDef(crew="onboarding", task="interview_founder", agent="interviewer",
                instructions="Interview the founder about the idea.", fills="founder_interview",
                reads=["entrepreneur_input"], skippable=True),
        TaskDef(crew="onboarding", task="draft_founders_brief", agent="brief_writer",
                instructions="Write the founder's brief.", fills="founders_brief",
                reads=["entrepreneur_input", "founder_interview"]),
    ]),
    PhaseDef(number=1, name="vpc_discovery", checkpoint=CHECKPOINTS[1], tasks=[
        TaskDef(crew="discovery", task="profile_customer_segment", agent="customer_researcher",
                instructions="Profile the customer segment.", fills="customer_profile",
                reads=["founders_brief", "target_segment"]),
        TaskDef(crew="discovery", task="design_value_map", agent="value_designer",
                instructions="Design the value map.", fills="value_map",
                reads=["founders_brief", "customer_profile"]),
        TaskDef(crew="discovery", task="assess_fit", agent="fit_analyst",
                instructions="Assess problem-solution fit.", fills="fit_assessment",
                reads=["customer_profile", "value_map"], skippable=True),
    ]),
    PhaseDef(number=2, name="desirability", checkpoint=CHECKPOINTS[2], tasks=[
        TaskDef(crew="growth", task="run_desirability_experiments", agent="growth_marketer",
                instructions="Run desirability experiments.", fills="desirability_evidence",
                reads=["founders_brief", "customer_profile", "value_map"]),
        TaskDef(crew="governance", task="judge_desirability", agent="evidence_judge",
                instructions="Judge the desirability evidence.", fills="desirability_signal",
                reads=["desirability_evidence"], skippable=True),
    ]),
    PhaseDef(number=3, name="feasibility", checkpoint=CHECKPOINTS[3], tasks=[
        TaskDef(crew="build", task="assess_technical_feasibility", agent="architect",
                instructions="Assess technical feasibility.", fills="feasibility_evidence",
                reads=["founders_brief", "value_map"]),
        TaskDef(crew="governance", task="judge_feasibility", agent="evidence_judge",
                instructions="Judge the feasibility evidence.", fills="feasibility_signal",
                reads=["feasibility_evidence"], skippable=True),
    ]),
    PhaseDef(number=4, name="viability", checkpoint=CHECKPOINTS[4], tasks=[
        TaskDef(crew="finance", task="model_unit_economics", agent="financial_analyst",
                instructions="Model the unit economics.", fills="viability_evidence",
                reads=["founders_brief", "customer_profile", "value_map"]),
        TaskDef(crew="governance", task="judge_viability", agent="evidence_judge",
                instructions="Judge the viability evidence.", fills="viability_signal",
                reads=["viability_evidence"], skippable=True),
        TaskDef(crew="synthesis", task="recommend_pivot", agent="strategist",
                instructions="Recommend proceed, pivot or kill.", fills="pivot_recommendation",
                reads=["desirability_signal", "feasibility_signal", "viability_signal",
                       "fit_assessment"]),
    ]),
]

PHASE_COUNT = len(PHASES)


def segment_option(segment: str) -> str:
    return "segment_" + re.sub(r"[^a-z0-9]+", "_", segment.lower()).strip("_")

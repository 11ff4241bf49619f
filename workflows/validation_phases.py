"""The five phases of a validation run, their crews' tasks, and the gates between them."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

CHECKPOINTS = ("approve_founders_brief", "approve_vpc_completion",
               "approve_desirability_gate", "approve_feasibility_gate",
               "approve_viability_gate")


class TaskDef(BaseModel):
    crew: str
    task: str
    agent: str
    instructions: str
    # The state field this task's output fills; a `signal` task stores its signal there.
    fills: str


class PhaseDef(BaseModel):
    number: int
    name: str
    tasks: list[TaskDef]
    checkpoint: str


PHASES: list[PhaseDef] = [
    PhaseDef(number=0, name="onboarding", checkpoint=CHECKPOINTS[0], tasks=[
        TaskDef(crew="onboarding", task="interview_founder", agent="interviewer",
                instructions="Interview the founder about the idea.", fills=""),
        TaskDef(crew="onboarding", task="draft_founders_brief", agent="brief_writer",
                instructions="Write the founder's brief.", fills="founders_brief"),
    ]),
    PhaseDef(number=1, name="vpc_discovery", checkpoint=CHECKPOINTS[1], tasks=[
        TaskDef(crew="discovery", task="profile_customer_segment", agent="customer_researcher",
                instructions="Profile the customer segment.", fills="customer_profile"),
        TaskDef(crew="discovery", task="design_value_map", agent="value_designer",
                instructions="Design the value map.", fills="value_map"),
        TaskDef(crew="discovery", task="assess_fit", agent="fit_analyst",
                instructions="Assess problem-solution fit.", fills="fit_assessment"),
    ]),
    PhaseDef(number=2, name="desirability", checkpoint=CHECKPOINTS[2], tasks=[
        TaskDef(crew="growth", task="run_desirability_experiments", agent="growth_marketer",
                instructions="Run desirability experiments.", fills="desirability_evidence"),
        TaskDef(crew="governance", task="judge_desirability", agent="evidence_judge",
                instructions="Judge the desirability evidence.", fills="desirability_signal"),
    ]),
    PhaseDef(number=3, name="feasibility", checkpoint=CHECKPOINTS[3], tasks=[
        TaskDef(crew="build", task="assess_technical_feasibility", agent="architect",
                instructions="Assess technical feasibility.", fills="feasibility_evidence"),
        TaskDef(crew="governance", task="judge_feasibility", agent="evidence_judge",
                instructions="Judge the feasibility evidence.", fills="feasibility_signal"),
    ]),
    PhaseDef(number=4, name="viability", checkpoint=CHECKPOINTS[4], tasks=[
        TaskDef(crew="finance", task="model_unit_economics", agent="financial_analyst",
                instructions="Model the unit economics.", fills="viability_evidence"),
        TaskDef(crew="governance", task="judge_viability", agent="evidence_judge",
                instructions="Judge the viability evidence.", fills="viability_signal"),
        TaskDef(crew="synthesis", task="recommend_pivot", agent="strategist",
                instructions="Recommend proceed, pivot or kill.", fills="pivot_recommendation"),
    ]),
]

PHASE_COUNT = len(PHASES)


def segment_option(segment: str) -> str:
    return "segment_" + re.sub(r"[^a-z0-9]+", "_", segment.lower()).strip("_")


def signal_of(state_field: dict[str, Any] | None) -> str:
    return str((state_field or {}).get("signal", "unknown"))

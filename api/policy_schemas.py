"""Request and response models of decision policies (`/policies`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from waystation.contracts.decision_policies import PolicyDecision, PolicyMode, VerdictOutcome
from waystation.persistence.policies import PolicyRow

Checkpoint = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[a-z0-9_]+$")]


class PolicyBody(BaseModel):
    """A version of a policy: which gates it judges, its CEL condition and what it does."""

    model_config = ConfigDict(extra="forbid")
    kind: str = Field(min_length=1, max_length=100)
    checkpoint: Checkpoint | None = Field(None, description="The gate it judges; every gate "
                                                            "of the kind when absent.")
    project_id: str | None = Field(None, min_length=1, max_length=200,
                                   description="Only runs of this project; every one when "
                                               "absent.")
    condition: str = Field(min_length=1, max_length=4000,
                           description="A CEL expression over `request` and `run`.")
    decision: PolicyDecision
    mode: PolicyMode = "decide"


class PolicyCreate(PolicyBody):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,79}$")
    group_id: UUID | None = Field(None, description="A group's policy (its deciders write "
                                                    "it); the caller's own when absent.")


class PolicyChange(PolicyBody):
    """`PUT /policies/{id}`: its next version. `name` and `group_id` may be repeated, not
    changed."""

    name: str | None = None
    group_id: UUID | None = None


class ShadowAgreement(BaseModel):
    compared: int = Field(description="People's decisions it was compared with.")
    agreed: int
    rate: float | None = Field(description="agreed / compared; null before any comparison.")


class PolicyView(BaseModel):
    policy_id: UUID
    name: str
    version: int
    kind: str
    checkpoint: str | None
    project_id: str | None
    group_id: UUID | None
    owner: str
    condition: str
    decision: PolicyDecision
    mode: PolicyMode
    created_by: str = Field(description="Who wrote this version.")
    created_at: datetime
    updated_at: datetime
    shadow: ShadowAgreement

    @classmethod
    def of(cls, row: PolicyRow) -> PolicyView:
        return cls(policy_id=row.id, name=row.name, version=row.version, kind=row.kind,
                   checkpoint=row.checkpoint_name, project_id=row.project_id,
                   group_id=row.group_id, owner=row.owner, condition=row.condition,
                   decision=row.decision, mode=row.mode, created_by=row.created_by,
                   created_at=row.created_at, updated_at=row.updated_at,
                   shadow=ShadowAgreement(compared=row.compared, agreed=row.agreed,
                                          rate=row.agreed / row.compared if row.compared
                                          else None))


class PolicyList(BaseModel):
    policies: list[PolicyView]


class PolicyQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: str | None = Field(None, min_length=1, max_length=100, pattern=r"^[^\x00]+$")
    limit: int = Field(100, ge=1, le=500)


class DryRunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    last: int = Field(20, ge=1, le=500, description="How many of the gate's latest requests.")


class DryRunItem(BaseModel):
    request_id: UUID
    run_id: UUID
    checkpoint: str
    created_at: datetime
    status: str
    decision: str | None = Field(description="What was decided (by whoever decided it).")
    decided_by: str | None
    outcome: VerdictOutcome = Field(description="What the policy would have come to.")
    would_decide: str | None
    agrees: bool | None = Field(description="Whether it would have decided as was decided; "
                                            "null when it would not decide or nothing was.")
    error: str | None = None


class DryRunView(BaseModel):
    policy_id: UUID
    version: int
    evaluated: int
    matched: int
    agreed: int
    compared: int
    requests: list[DryRunItem]

"""Request and response models of groups, their members and their runs."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from waystation.persistence.models import GroupRow, MemberRow, RunRow, RunStatus

# The same rule as the column's CHECK (migration 012): a team may name any role.
Role = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,49}$",
                            description="`owner` (manages members, decides), `approver` "
                                        "(decides), `viewer` (reads), or any role a team "
                                        "names on its gates.")]
UserName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00]+$")]


class GroupCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00]+$")


class GroupView(BaseModel):
    group_id: UUID
    name: str
    created_by: str
    created_at: datetime
    role: str | None = Field(description="The caller's role (null for the service role).")

    @classmethod
    def of(cls, group: GroupRow) -> GroupView:
        return cls(group_id=group.id, **group.model_dump(exclude={"id"}))


class GroupList(BaseModel):
    groups: list[GroupView]


class MemberPut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: UserName
    role: Role


class MemberView(BaseModel):
    group_id: UUID
    user: str
    role: str
    added_by: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, member: MemberRow) -> MemberView:
        return cls(user=member.user_name, **member.model_dump(exclude={"user_name"}))


class GroupDetail(GroupView):
    members: list[MemberView]


class GroupRunView(BaseModel):
    """Where a group's run stands: enough for any member to pick it up (seed 003)."""

    run_id: UUID
    kind: str
    owner: str
    status: RunStatus
    current_phase: int
    phase_name: str | None
    pending_checkpoint: str | None = Field(description="The decision it waits for, if any.")
    hitl_checkpoint_at: datetime | None
    context_summary: str | None = Field(description="What an agent run has done so far, to "
                                                    "pick it up from (agent runs).")
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, run: RunRow) -> GroupRunView:
        return cls(run_id=run.id, kind=run.kind, owner=run.owner, status=run.status,
                   current_phase=run.current_phase, phase_name=run.phase_name,
                   pending_checkpoint=run.hitl_state, hitl_checkpoint_at=run.hitl_checkpoint_at,
                   context_summary=run.context_summary, created_at=run.created_at,
                   updated_at=run.updated_at)


class GroupRunList(BaseModel):
    group_id: UUID
    runs: list[GroupRunView]


class GroupRunQuery(BaseModel):
    """`GET /groups/{id}/runs`'s filter."""

    status: RunStatus | None = None
    limit: int = Field(100, ge=1, le=500)

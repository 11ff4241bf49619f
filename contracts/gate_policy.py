"""Who decides a gate, what they answer, and how the wait reminds and escalates.

A run kind's gates carry their own rules (`waystation.workflows.gate_rules.GateSpec`); a kind may
set defaults for all its runs (`RunKind.gate_policy`) and a run may override them at `POST /runs`
(`"gates": {"<checkpoint>" | "*": {...}}`). The API merges the two and hands them to the
workflow in its memo (`GATE_POLICY_MEMO`), which is part of the run's start event: a change of
defaults reaches new runs only, and a replay sees the rules the run started with.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from waystation.contracts.user_schemas import check_user_schema

GATE_POLICY_MEMO = "waystation_gates"
ALL_GATES = "*"

Role = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,49}$")]
UserName = Annotated[str, StringConstraints(min_length=1, max_length=200)]
AnswerMode = Literal["none", "optional", "required"]


class GatePolicy(BaseModel):
    """Rules for one gate (or, under `*`, every gate of a run); unset fields keep the gate's."""

    model_config = ConfigDict(extra="forbid")

    decider_roles: list[Role] | None = Field(
        None, max_length=20, description="Roles of the run's group that may decide (the run's "
                                         "owner always may).")
    decider_users: list[UserName] | None = Field(
        None, max_length=100, description="Named people who may decide besides those roles.")
    quorum: int | None = Field(None, ge=1, le=50, description="Approvals needed (`2` of three "
                                                              "approvers); one rejection "
                                                              "rejects.")
    answer_schema: dict[str, Any] | None = Field(
        None, description="A JSON Schema the answer must satisfy (`{\"type\": \"string\"}` for "
                          "free text); shown to the decider and part of the request's digest.")
    answer_options: dict[str, Literal["optional", "required"]] | None = Field(
        None, description="Options that carry the answer: `required` (the option is the "
                          "answer), `optional` (approve as it is, or with edits).")
    remind_before_expiry: timedelta | None = Field(
        None, gt=timedelta(0), description="Remind the deciders this long before expiry.")
    remind_every: timedelta | None = Field(
        None, ge=timedelta(minutes=1), description="And every so often while it waits.")
    escalate_after: timedelta | None = Field(
        None, gt=timedelta(0), description="After this long undecided, `escalate_to_roles` may "
                                           "decide too (and are told).")
    escalate_to_roles: list[Role] | None = Field(None, min_length=1, max_length=20)

    @field_validator("answer_schema")
    @classmethod
    def _valid_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        # A broken schema would refuse every answer; a remote one would fetch at decide time.
        return None if schema is None else check_user_schema(schema)

    @model_validator(mode="after")
    def _consistent(self) -> GatePolicy:
        if self.answer_options and self.answer_schema is None:
            raise ValueError("answer_options needs an answer_schema")
        if (self.escalate_after is None) != (self.escalate_to_roles is None):
            raise ValueError("escalate_after and escalate_to_roles go together")
        return self

    def over(self, base: GatePolicy | None) -> GatePolicy:
        """This policy laid over `base`: the fields set here win."""
        if base is None:
            return self
        return base.model_copy(update={k: getattr(self, k) for k in self.model_fields_set})


GatePolicies = dict[Annotated[str, StringConstraints(pattern=r"^(\*|[a-z0-9_]{1,200})$")],
                    GatePolicy]


def merge_policies(defaults: GatePolicies, run: GatePolicies) -> GatePolicies:
    """A kind's defaults overlaid by one run's rules, key by key."""
    merged = dict(defaults)
    for key, policy in run.items():
        merged[key] = policy.over(merged.get(key))
    return merged


def policy_for(policies: GatePolicies, checkpoint_name: str) -> GatePolicy | None:
    """The rules of one gate: its own laid over the run's `*`."""
    own, every = policies.get(checkpoint_name), policies.get(ALL_GATES)
    if own is None:
        return every
    return own.over(every)

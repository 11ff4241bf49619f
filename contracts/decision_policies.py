"""Decision policies: rules, kept as data, that decide a gate, route it or leave it to people.

A policy is a CEL condition over what a gate shows (`PolicyRequest`) and the run it belongs to
(`PolicyRun`), and an outcome (`PolicyDecision`). When a gate opens, an activity evaluates
every policy that applies and returns `PolicyVerdicts`; the workflow acts on that result, which
is in its history, so a replay acts the same however the policies changed since.
"""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, model_validator

from waystation.contracts.gate_policy import Role, UserName

PolicyMode = Literal["decide", "shadow"]
Outcome = Literal["decide", "route", "quorum", "people"]
# What one evaluation came to: the policy's outcome when its condition held, else "none";
# "error" when the condition could not be evaluated (a missing field, a wrong type).
VerdictOutcome = Literal["decide", "route", "quorum", "people", "none", "error"]
POLICY_DECIDER = "policy:"


class PolicyDecision(BaseModel):
    """What a policy does when its condition holds: the decide body of
    `POST /runs/{id}/decisions/{checkpoint}` (`decision`, `feedback` as its reason, `answer`),
    or, without a `decision`, a routing (`route_to_roles`, `route_to_users`), a larger
    `quorum`, or nothing of these: leave it to people (and keep other policies from deciding)."""

    model_config = ConfigDict(extra="forbid")
    decision: str | None = Field(None, min_length=1, max_length=200)
    feedback: str | None = Field(None, max_length=2000, description="The reason, recorded "
                                                                     "with the decision.")
    answer: Any = None
    route_to_roles: list[Role] = Field(default_factory=list, max_length=20)
    route_to_users: list[UserName] = Field(default_factory=list, max_length=50)
    quorum: int | None = Field(None, ge=1, le=50)

    @model_validator(mode="after")
    def _one_outcome(self) -> PolicyDecision:
        if self.decision is not None and (self.route_to_roles or self.route_to_users
                                          or self.quorum is not None):
            raise ValueError("a policy decides, or routes / asks a larger quorum: not both")
        if self.answer is not None and self.decision is None:
            raise ValueError("answer goes with a decision")
        return self

    @property
    def outcome(self) -> Outcome:
        if self.decision is not None:
            return "decide"
        if self.route_to_roles or self.route_to_users:
            return "route"
        return "quorum" if self.quorum is not None else "people"


class PolicyTool(BaseModel):
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class PolicyRequest(BaseModel):
    """The gate as a condition sees it (`request`)."""

    checkpoint: str
    options: list[str]
    recommended_option: str | None = None
    context: dict[str, Any] = Field(default_factory=dict)
    # A tool call's approval: the tool's name and the arguments it would be called with.
    tool: PolicyTool | None = None

    @classmethod
    def of(cls, checkpoint: str, options: list[str], recommended_option: str | None,
           context: dict[str, Any]) -> PolicyRequest:
        """A gate that shows a `tool` and its `arguments` in its context asks to run a tool."""
        name, args = context.get("tool"), context.get("arguments")
        tool = (PolicyTool(name=name, args=args)
                if isinstance(name, str) and isinstance(args, dict) else None)
        return cls(checkpoint=checkpoint, options=options, recommended_option=recommended_option,
                   context=context, tool=tool)


class PolicyRun(BaseModel):
    """The run as a condition sees it (`run`)."""

    kind: str
    input: dict[str, Any] = Field(default_factory=dict)
    owner: str
    group_id: str | None = None
    project_id: str | None = None
    cost_usd: float = 0.0


class PolicyVerdict(BaseModel):
    """One policy's evaluation on one gate: at which version, and what it came to."""

    policy_id: UUID
    name: str
    version: int
    mode: PolicyMode
    outcome: VerdictOutcome
    decision: PolicyDecision | None = None
    error: str | None = None

    @property
    def decided_by(self) -> str:
        return f"{POLICY_DECIDER}{self.name}@{self.version}"

    @property
    def acts(self) -> bool:
        """Whether it changes the gate (a shadow policy only watches)."""
        return self.mode == "decide" and self.outcome in ("decide", "route", "quorum", "people")


class EvaluatePoliciesInput(BaseModel):
    run_id: UUID
    request_id: UUID
    request: PolicyRequest


class PolicyVerdicts(BaseModel):
    """Every applicable policy's verdict on a gate, in the order they were evaluated (by name),
    and what the gate does with them."""

    verdicts: list[PolicyVerdict] = Field(default_factory=list)

    def _acting(self, outcome: VerdictOutcome) -> list[PolicyVerdict]:
        return [v for v in self.verdicts if v.acts and v.outcome == outcome]

    def deciding(self) -> PolicyVerdict | None:
        """The first policy that decides, unless one says to leave the gate to people: a rule
        that holds back wins over a rule that acts."""
        if self._acting("people"):
            return None
        deciding = self._acting("decide")
        return deciding[0] if deciding else None

    def route_roles(self) -> list[str]:
        return list(dict.fromkeys(r for v in self._acting("route") if v.decision
                                  for r in v.decision.route_to_roles))

    def route_users(self) -> list[str]:
        return list(dict.fromkeys(u for v in self._acting("route") if v.decision
                                  for u in v.decision.route_to_users))

    def quorum(self) -> int | None:
        asked = [v.decision.quorum for v in self.verdicts
                 if v.acts and v.decision and v.decision.quorum]
        return max(asked) if asked else None

    def shown(self) -> list[dict[str, Any]]:
        """What the gate's `opened` event says of them (the timeline)."""
        return [{"policy": v.decided_by, "mode": v.mode, "outcome": v.outcome,
                 **({"decision": v.decision.decision} if v.decision and v.decision.decision
                    else {})} for v in self.verdicts]

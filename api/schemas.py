"""Request and response models of the HTTP API."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Union
from uuid import UUID

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, create_model, model_validator

from waystation.contracts.gate_policy import GatePolicies
from waystation.contracts.kinds import RunKind
from waystation.persistence.api_keys import ApiKeyRow
from waystation.persistence.models import (
    EventRow,
    GateAudit,
    GateOption,
    GateRow,
    GateStatus,
    RunRow,
    RunStatus,
)
from waystation.persistence.runs import CreateOutcome

ProjectId = Annotated[str | None, Field(min_length=1, max_length=200,
                                        description="The project the run belongs to; "
                                                    "`GET /runs?project_id=` filters by it.")]

GroupId = Annotated[UUID | None, Field(description="The group the run belongs to: its members "
                                                  "read it, and those whose role a gate names "
                                                  "decide it (you must be a member, not a "
                                                  "viewer).")]


RunName = Annotated[str | None, Field(
    min_length=1, max_length=100,
    description="A name for the run within its group (`group_id` required), such as `venue "
                "booking`: while the group has a run of this kind and name in progress, "
                "starting one returns that run (200, `created` false, `reused` true) instead "
                "of a second one (seed 003).")]

ReuseInProgress = Annotated[bool, Field(
    description="With `name`: false refuses (409 `run_in_progress`, naming the run) instead "
                "of returning the group's run of that name in progress.")]

GateRules = Annotated[GatePolicies | None, Field(
    max_length=50, description="Rules for this run's gates, by checkpoint name (`*`: every "
                               "gate): who decides (`decider_roles`, `decider_users`, "
                               "`quorum`), a typed answer (`answer_schema`, `answer_options`), "
                               "reminders (`remind_before_expiry`, `remind_every`) and "
                               "escalation (`escalate_after`, `escalate_to_roles`); durations "
                               "in seconds or ISO 8601 (`P2D`). Laid over the kind's defaults.")]


def run_create_model(kinds: list[RunKind]) -> Any:
    """The `POST /runs` body: one model per registered kind, discriminated by `kind`."""
    models = [create_model(
        "".join(part.title() for part in kind.name.split("_")) + "RunCreate",
        __config__=ConfigDict(extra="forbid"),
        __doc__=kind.description or f"Start a {kind.name} run.",
        kind=(Literal[kind.name], ...),  # type: ignore[arg-type]
        input=(kind.input_model, ...),
        project_id=(ProjectId, None),
        group_id=(GroupId, None),
        gates=(GateRules, None),
        name=(RunName, None),
        reuse_in_progress=(ReuseInProgress, True),
    ) for kind in kinds]
    if len(models) == 1:
        return models[0]
    return Annotated[Union[tuple(models)], Field(discriminator="kind")]  # noqa: UP007


class RunCreated(BaseModel):
    run_id: UUID
    workflow_id: str
    kind: str
    status: RunStatus
    created: bool = Field(description="False when an earlier request with the same "
                                      "Idempotency-Key created this run, or when it is the "
                                      "group's run of that `name` in progress (`reused`).")
    reused: bool = Field(False, description="True when this is the group's run of the same "
                                            "kind and `name` already in progress.")

    @classmethod
    def of(cls, run: RunRow, outcome: CreateOutcome) -> RunCreated:
        return cls(run_id=run.id, workflow_id=run.workflow_id, kind=run.kind,
                   status=run.status, created=outcome == "created",
                   reused=outcome == "in_progress")


class DecisionView(BaseModel):
    request_id: UUID
    run_id: UUID
    checkpoint_name: str
    phase: int
    title: str
    description: str
    context: dict[str, Any]
    options: list[GateOption]
    recommended_option: str | None
    digest: str
    expiry_policy: str
    default_option: str | None
    status: GateStatus
    decision: str | None
    feedback: str | None
    decided_by: str | None
    decided_at: datetime | None
    answer: Any = Field(None, description="The typed answer the decision carried (an edited "
                                          "document, a tool call's edited arguments).")
    answer_schema: dict[str, Any] | None = Field(
        None, description="The JSON Schema a typed answer must satisfy; options say whether "
                          "they carry one (`answer`: `required` / `optional`).")
    answer_initial: Any = Field(None, description="The document offered for editing.")
    expires_at: datetime | None
    created_at: datetime
    decider_roles: list[str] = Field(description="The roles of the run's group that may "
                                                 "decide it, besides the run's owner.")
    decider_users: list[str] = Field(default_factory=list,
                                     description="People named as deciders besides the roles.")
    quorum: int = Field(1, description="Approvals it takes; one rejection rejects.")
    votes: list[VoteView] = Field(default_factory=list, description="Every vote, in order.")
    delegations: list[DelegationView] = Field(default_factory=list)
    reminders_sent: int = 0
    escalated_at: datetime | None = None

    @classmethod
    def of(cls, gate: GateRow, audit: GateAudit | None = None) -> DecisionView:
        """The request, with its votes and delegations when `audit` gives them."""
        return cls(request_id=gate.id, decided_by=gate.decision_by, decided_at=gate.decision_at,
                   votes=[VoteView.model_validate(v.model_dump())
                          for v in (audit.votes if audit else [])],
                   delegations=[DelegationView.model_validate(d.model_dump())
                                for d in (audit.delegations if audit else [])],
                   **gate.model_dump(exclude={"id", "decision_by", "decision_at", "updated_at"}))


class VoteView(BaseModel):
    voter: str
    on_behalf_of: str = Field(description="Whose vote it is (the voter's own unless delegated).")
    option: str
    feedback: str | None
    answer: Any
    digest: str = Field(description="The digest of what the voter saw.")
    voted_at: datetime


class DelegationView(BaseModel):
    from_user: str
    to_user: str
    delegated_at: datetime


class RunView(BaseModel):
    # `GET /runs/{id}` adds the fields its kind's `view` hook gives of its own tables (a
    # mobile run's `app_package`), which the core does not know.
    model_config = ConfigDict(extra="allow")

    run_id: UUID
    kind: str
    owner: str
    group_id: UUID | None
    project_id: str | None
    workflow_id: str
    status: RunStatus
    current_phase: int
    phase_name: str | None
    pending_checkpoint: str | None
    hitl_checkpoint_at: datetime | None
    pending_decision: DecisionView | None = None
    input: dict[str, Any]
    result: dict[str, Any] | None
    error_message: str | None
    last_seq: int
    created_at: datetime
    started_at: datetime | None
    updated_at: datetime
    completed_at: datetime | None
    finished_at: datetime | None = Field(description="When the run reached its final status.")
    context_summary: str | None = Field(None, description="An agent run's short summary of "
                                                          "its conversation, re-primed from.")
    stop_reason: str | None = Field(description="Why the run stopped: `completed`, "
                                                "`canceled`, `activity_failed`, or the kind's "
                                                "own reason (`max_steps`, `rejected`, ...).")
    cost_usd: float = Field(0.0, description="Model calls' cost, every attempt counted.")
    input_tokens: int = 0
    output_tokens: int = 0
    gates: dict[str, Any] | None = Field(None, description="The gate rules the run was "
                                                          "started with (`POST /runs` `gates`).")
    name: str | None = Field(None, description="The run's name within its group (`POST "
                                               "/runs` `name`).")
    related_entity_ids: dict[str, list[str]] | None = Field(
        None, description="Ids of the entities an agent run's tools returned that its agent "
                          "declares, by kind (the planner: `vendor_ids` shortlisted or "
                          "booked), re-primed from with the `context_summary`.")
    forked_from: dict[str, Any] | None = Field(
        None, description="A forked run's source (`POST /runs/{id}/fork`): `run_id`, "
                          "`snapshot` (its ordinal), `checkpoint` and the `decision` applied "
                          "first; null for a run started otherwise.")

    @classmethod
    def of(cls, run: RunRow) -> RunView:
        return cls(run_id=run.id, pending_checkpoint=run.hitl_state, gates=run.gate_policies,
                   **run.model_dump(exclude={"id", "hitl_state", "gate_policies", "erased_at",
                                             "hidden_by"}))


class RunVisibility(BaseModel):
    """Whether a run is hidden (`POST /runs/{id}/hide`) and until when it can be restored."""

    run_id: UUID
    hidden: bool
    hidden_at: datetime | None = None
    restore_until: datetime | None = Field(
        None, description="Until then its owner may restore it; the retention sweep deletes "
                          "it after.")


class RunPage(BaseModel):
    runs: list[RunView]
    next_cursor: str | None


class EventView(BaseModel):
    seq: int
    type: str
    phase: int | None
    crew: str | None
    task: str | None
    agent: str | None
    status: str | None
    progress_pct: int | None
    output: Any
    error_message: str | None
    duration_ms: int | None
    created_at: datetime

    @classmethod
    def of(cls, event: EventRow) -> EventView:
        return cls(**event.model_dump(exclude={"run_id", "event_key"}))


class MessageDelta(BaseModel):
    """A piece of a message being written (issue 43), outside the run's `seq` sequence: `delta`
    goes at offset `at` of the message's text (`call_id` null) or of its tool call's arguments.
    A client keeps, per message, the text of its highest `attempt`: a `reset` (a retried model
    request) drops what it showed; a delta that ends within what it shows is already shown; one
    that starts past its end is missing a piece (the stream sends the whole text so far, from
    `at` 0, when it drops deltas for a slow client). The finished message is the durable event
    (`agent.answered`, `model.responded`) whose output carries the same `message_id`."""

    type: Literal["message.delta"] = "message.delta"
    run_id: UUID
    message_id: str
    attempt: int
    reset: bool = False
    call_id: str | None = None
    tool: str | None = None
    at: int = 0
    delta: str = ""


class EventPage(BaseModel):
    run_id: UUID
    events: list[EventView]
    next_after_seq: int = Field(description="Pass as after_seq to read on.")


class SnapshotView(BaseModel):
    run_id: UUID
    step_ordinal: int
    label: str
    phase: int | None
    state: dict[str, Any]
    created_at: datetime


class SnapshotHead(BaseModel):
    step_ordinal: int
    label: str
    phase: int | None
    created_at: datetime


class SnapshotList(BaseModel):
    run_id: UUID
    snapshots: list[SnapshotHead] = Field(description="Oldest first, without their state; "
                                                      "read one by its ordinal.")


class DecisionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    decision: str = Field(min_length=1, max_length=200)
    feedback: str | None = Field(None, max_length=10_000)
    request_id: UUID | None = Field(None, description="The request you reviewed; refused if "
                                                      "it is no longer the open one.")
    digest: str | None = Field(None, min_length=64, max_length=64, pattern="^[0-9a-f]{64}$",
                               description="The digest of the request you reviewed.")
    answer: Any = Field(None, validation_alias=AliasChoices("answer", "arguments"),
                        description="The typed answer, for an option that takes one: checked "
                                    "against the request's `answer_schema` (422 naming the "
                                    "JSON path). `arguments` is accepted as its other name (a "
                                    "tool call's edited arguments).")


class ForkFrom(BaseModel):
    """The source run's snapshot a fork starts from: by ordinal, or the newest one taken at a
    gate."""

    model_config = ConfigDict(extra="forbid")
    snapshot: int | None = Field(None, ge=1, le=2**31 - 1,
                                 description="A snapshot's ordinal (`GET /runs/{id}/snapshots`).")
    checkpoint: str | None = Field(None, min_length=1, max_length=200,
                                   description="A gate: the newest snapshot taken while the "
                                               "run waited on it.")

    @model_validator(mode="after")
    def _one_of(self) -> ForkFrom:
        if (self.snapshot is None) == (self.checkpoint is None):
            raise ValueError("give either snapshot or checkpoint")
        return self


class ForkRequest(BaseModel):
    """`POST /runs/{id}/fork`: a new run of the same kind from one of the run's snapshots."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    from_: ForkFrom = Field(alias="from")
    decision: DecisionRequest | None = Field(
        None, description="Applied first to the gate the snapshot was taken at, as "
                          "`POST /runs/{id}/decisions/{checkpoint}` would (amending a past "
                          "decision).")
    input: dict[str, Any] | None = Field(
        None, description="Fields of the kind's input that replace the source's.")


class DelegationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    to: str = Field(min_length=1, max_length=200, description="The member who casts your vote.")
    request_id: UUID | None = Field(None, description="The request you reviewed.")


class DecisionList(BaseModel):
    decisions: list[DecisionView]


class CancelAccepted(BaseModel):
    run_id: UUID
    status: Literal["canceling"]


class Liveness(BaseModel):
    status: Literal["ok"]


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    database: Literal["ok", "unavailable"]
    temporal: Literal["ok", "unavailable"]


class DecisionLinkAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    decision: str = Field(min_length=1, max_length=200)
    feedback: str | None = Field(None, max_length=10_000)


class DecisionLinkView(BaseModel):
    decide_as: str = Field(description="The person the link decides as.")
    expires_at: datetime
    request: DecisionView


class ContactPut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    email: str = Field(max_length=254, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


class ContactView(BaseModel):
    user: str
    email: str
    updated_at: datetime


class ApiKeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00]+$")
    group_id: UUID | None = Field(None, description="Scope the key to this group (you must "
                                                    "own it): the key is its own member.")
    role: str | None = Field(None, pattern=r"^[a-z][a-z0-9_]{0,49}$",
                             description="The group key's role (default `approver`; not "
                                         "`owner`: keys do not manage members).")

    @model_validator(mode="after")
    def _role_only_for_a_group(self) -> ApiKeyCreate:
        if self.group_id is None and self.role is not None:
            raise ValueError("role is for group keys only (give group_id)")
        if self.role == "owner":
            raise ValueError("a key may not be a group owner")
        if self.group_id is not None and self.role is None:
            self.role = "approver"
        return self


class ApiKeyView(BaseModel):
    key_id: UUID
    name: str
    acts_as: str = Field(description="The user the key authenticates as.")
    group_id: UUID | None
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def of(cls, key: ApiKeyRow) -> ApiKeyView:
        return cls(key_id=key.id, name=key.name, acts_as=key.principal, group_id=key.group_id,
                   created_at=key.created_at, revoked_at=key.revoked_at)


class ApiKeyCreated(ApiKeyView):
    key: str = Field(description="`Authorization: Bearer <key>`; it is never shown again.")


class ApiKeyList(BaseModel):
    api_keys: list[ApiKeyView]


class MessageRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=20_000)


class ErasureRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: str = Field(min_length=1, max_length=200, description="The runs' owner (a token's sub).")


class ErasureAccepted(BaseModel):
    user: str
    runs_hidden: int = Field(description="Runs hidden by this request (0 when already erased).")
    hard_delete_after: float = Field(
        description="Seconds after which the retention sweep deletes them for good.")


class MessageAccepted(BaseModel):
    run_id: UUID
    number: int = Field(description="The message's number in the conversation, from 1.")
    turn: int = Field(description="The agent turn it starts.")


class TranscriptEntry(BaseModel):
    """One line of an agent run's transcript, from its run events."""

    seq: int
    type: str
    role: Literal["user", "agent", "tool"]
    turn: int | None
    text: str | None = None
    sent_by: str | None = None
    tool: str | None = None
    call_id: str | None = Field(None, description="The tool call a call and its result share.")
    message_id: str | None = Field(None, description="An answer's: the id its live deltas "
                                                     "carried (`message.delta`).")
    arguments: dict[str, Any] | None = None
    result: Any = None
    created_at: datetime

    @classmethod
    def of(cls, event: EventRow) -> TranscriptEntry:
        out = event.output if isinstance(event.output, dict) else {}
        role = {"message.received": "user", "agent.answered": "agent"}.get(event.type, "tool")
        return cls(seq=event.seq, type=event.type, role=role,
                   turn=out.get("turn", event.phase), text=out.get("text"),
                   sent_by=out.get("sent_by"), tool=out.get("tool"), call_id=out.get("call_id"),
                   message_id=out.get("message_id") if role == "agent" else None,
                   arguments=out.get("arguments"), result=out.get("result", out.get("told")),
                   created_at=event.created_at)


class MessagePage(BaseModel):
    run_id: UUID
    context_summary: str | None
    messages: list[TranscriptEntry]
    next_after_seq: int = Field(description="Pass as after_seq to read on.")


class SlackLinkView(BaseModel):
    """A Slack user now linked to the caller: their clicks in Slack decide as the caller."""

    team_id: str
    slack_user: str
    user: str
    linked_at: datetime

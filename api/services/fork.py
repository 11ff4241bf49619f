"""Forks: a new run of the same kind from one of a run's snapshots (issue 29), optionally
applying a different decision first to the gate the snapshot was taken at ("amend a past
decision"). The source run is only read. Every refusal comes before anything is written."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
from pydantic import ValidationError
from temporalio.client import Client

from waystation.api.auth import User
from waystation.api.errors import ApiError, invalid_field
from waystation.api.run_kinds import create_and_start, gate_policies_of
from waystation.api.schemas import DecisionRequest, ForkFrom, ForkRequest, RunCreated
from waystation.api.services.access import may_act, require_decider
from waystation.api.services.runs import check_start
from waystation.contracts.kinds import ForkPoint, ForkRefused, ForkSource, RunKind, RunStart
from waystation.contracts.writes import DEFAULT_DECIDER_ROLES
from waystation.persistence import gates as gates_repo
from waystation.persistence import snapshots as snapshots_repo
from waystation.persistence.models import RunRow, SnapshotRow
from waystation.registry import Registry
from waystation.settings import Settings


async def fork_run(conn: asyncpg.Connection, temporal: Client, user: User, source: RunRow,
                   request: ForkRequest, *, registry: Registry, settings: Settings,
                   idempotency_key: str | None = None) -> RunCreated:
    """Start a run of `source`'s kind, owned by the caller, from the snapshot `request.from_`
    names; the same idempotency key again returns the same run, with `created` false. 422
    `fork_not_supported` for a kind without a fork hook (or a point its hook refuses); 403
    when a decision is applied and the caller may not decide the source's gate."""
    kind = registry.kind(source.kind)
    forks = kind.forks
    if forks.start is None:
        raise ApiError(422, "fork_not_supported",
                       f"a {kind.name} run cannot be forked: {forks.refusal}",
                       details=[{"kind": kind.name, "reason": forks.refusal}])
    snapshot = await _snapshot(conn, source, request.from_)
    checkpoint = snapshot.state.get("waiting_on")
    decision = (await _decision(conn, user, source, snapshot, checkpoint, request.decision)
                if request.decision is not None else None)
    point = ForkPoint(
        source_run_id=source.id, snapshot=snapshot.step_ordinal, label=snapshot.label,
        state=snapshot.state, checkpoint=checkpoint, decision=decision,
        forked_from={"run_id": str(source.id), "snapshot": snapshot.step_ordinal,
                     "checkpoint": checkpoint, "decision": decision})
    try:
        if forks.input is not None:
            new_input = await forks.input(ForkSource(
                run_id=source.id, status=source.status, waiting_on=source.hitl_state,
                input=source.input, point=point, replacing=request.input, conn=conn))
        else:
            new_input = _input(kind, source, request.input)
        await check_start(conn, kind, new_input, user, settings)
        # The hook is pure: asking it now, for a run not yet written, refuses before any
        # write; the run's own start asks it again with the run as written.
        forks.start(RunStart(run_id=uuid.uuid4(), owner=user.name, input=new_input,
                             project_id=source.project_id), point)
    except ForkRefused as refused:
        loc = [int(part) if part.isdigit() else part for part in refused.field.split(".")]
        raise ApiError(422, refused.code, f"{refused.field}: {refused.message}",
                       details=[{"loc": ["body", *loc], "msg": refused.message,
                                 "type": refused.code}]) from refused
    run, created = await create_and_start(
        conn, temporal, settings.temporal_task_queue, kind, owner=user.name, input=new_input,
        project_id=await _project(conn, user, source), idempotency_key=idempotency_key, fork=point,
        # The source's own gate rules: an amended decision needs the quorum the first needed.
        gate_policies=gate_policies_of(source) or None)
    return RunCreated.of(run, created)


async def _project(conn: asyncpg.Connection, user: User, source: RunRow) -> str | None:
    """The source's project only for a caller who may act on the source (its owner, a decider
    of its group): a fork is the caller's own run, and a reader of another's group must not
    spend that project's budget by forking its runs."""
    if source.project_id is None or not await may_act(conn, user, source,
                                                       list(DEFAULT_DECIDER_ROLES)):
        return None
    return source.project_id


async def _snapshot(conn: asyncpg.Connection, source: RunRow, where: ForkFrom) -> SnapshotRow:
    if where.checkpoint is not None:
        found = await snapshots_repo.latest_snapshot_at_gate(conn, source.id, where.checkpoint)
        if found is None:
            raise invalid_field(["body", "from", "checkpoint"],
                                f"run {source.id} never waited on {where.checkpoint!r}",
                                "not_found")
        return found
    assert where.snapshot is not None, "ForkFrom holds one of the two"
    found = await snapshots_repo.get_snapshot(conn, source.id, where.snapshot)
    if found is None:
        raise invalid_field(["body", "from", "snapshot"],
                            f"run {source.id} has no snapshot {where.snapshot}", "not_found")
    return found


async def _decision(conn: asyncpg.Connection, user: User, source: RunRow, snapshot: SnapshotRow,
                    checkpoint: str | None, request: DecisionRequest) -> dict[str, Any]:
    """The decision the fork applies first, checked against the options the source's gate
    offered (the fork's gate, opened from the same state, offers the same)."""
    if checkpoint is None:
        raise invalid_field(["body", "decision"],
                            f"snapshot {snapshot.step_ordinal} ({snapshot.label!r}) was not "
                            "taken at a gate: there is no decision to amend", "no_gate")
    gate = await gates_repo.latest_gate_for_checkpoint(conn, source.id, checkpoint)
    # Applying a decision is deciding: the gate's deciders only, as at
    # `POST /runs/{id}/decisions/{checkpoint}` (a viewer of the group may fork, not decide).
    await require_decider(conn, user, source,
                          gate.decider_roles if gate else list(DEFAULT_DECIDER_ROLES),
                          f"decide {checkpoint!r}")
    offered = [option.value for option in gate.options] if gate else []
    if request.decision not in offered:
        raise ApiError(422, "unknown_option",
                       f"unknown option {request.decision!r} for {checkpoint!r}; choose one "
                       f"of {', '.join(offered)}",
                       details=[{"loc": ["body", "decision", "decision"], "options": offered}])
    # The fork's gate is a new request: the source's request id and digest do not apply.
    return {"checkpoint_name": checkpoint, "decision": request.decision,
            "feedback": request.feedback, "answer": request.answer, "decided_by": user.name}


def _input(kind: RunKind, source: RunRow, replacing: dict[str, Any] | None) -> Any:
    """The source's input, with the fields the request replaces."""
    try:
        return kind.input_model.model_validate({**source.input, **(replacing or {})})
    except ValidationError as error:
        first = error.errors()[0]
        raise invalid_field(["body", "input", *first["loc"]], first["msg"],
                            first["type"]) from error

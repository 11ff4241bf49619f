"""Starting a run's workflow, the same way for every registered kind.

The API writes the `runs` row first (its `input` is the validated request input), then starts
the kind's workflow from it with the id `<prefix><run_id>`; a second start of the same run (an
idempotent retry) attaches to the first.
"""

from __future__ import annotations

import uuid
from typing import Any
from uuid import UUID

import asyncpg
from pydantic import TypeAdapter
from temporalio.client import Client
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
)
from temporalio.service import RPCError, RPCStatusCode

from waystation.api.errors import ApiError
from waystation.api.services.workflow_updates import temporal_refusal
from waystation.contracts.gate_policy import GATE_POLICY_MEMO, GatePolicies, merge_policies
from waystation.contracts.kinds import ForkPoint, RunKind, RunStart
from waystation.persistence import runs as runs_repo
from waystation.persistence.models import RunRow
from waystation.persistence.runs import CreateOutcome
from waystation.workflows import search_attributes as sa
from waystation.workflows.definitions import workflow_arg_type, workflow_type

_POLICIES = TypeAdapter(GatePolicies)


def initial_search_attributes(run: RunRow) -> TypedSearchAttributes:
    return TypedSearchAttributes([
        SearchAttributePair(sa.KIND, run.kind), SearchAttributePair(sa.OWNER, run.owner),
        SearchAttributePair(sa.STATUS, "pending"), SearchAttributePair(sa.PHASE, 0),
        SearchAttributePair(sa.AWAITING_HUMAN, False)])


def gate_policies_of(run: RunRow) -> GatePolicies:
    """The gate rules the run was started with (`POST /runs` `gates`), as written."""
    return _POLICIES.validate_python(run.gate_policies or {})


def run_start(kind: RunKind, run: RunRow) -> RunStart:
    return RunStart(run_id=run.id, owner=run.owner,
                    input=kind.input_model.model_validate(run.input),
                    project_id=run.project_id,
                    group_id=str(run.group_id) if run.group_id else None)


async def start_run(client: Client, task_queue: str, kind: RunKind, run: RunRow, *,
                    fork: ForkPoint | None = None) -> None:
    """Start the run's workflow; a fork's (`fork`) from its kind's `ForkHooks.start`."""
    start = run_start(kind, run)
    summary, details = kind.summary(start), kind.details(start) if kind.details else None
    if fork is not None:
        assert kind.forks.start is not None, "the fork service refuses kinds without the hook"
        arg = kind.forks.start(start, fork)
        summary = f"{summary} · fork of {fork.source_run_id} at snapshot {fork.snapshot}"
        details = "\n".join(filter(None, [_fork_details(fork), details]))
    elif kind.build_input is not None:
        arg = kind.build_input(start)
    else:
        arg_type = workflow_arg_type(kind.workflow)
        if arg_type is None:
            raise TypeError(f"kind {kind.name!r}: give build_input, or annotate the "
                            "workflow's run argument with a model of run_id, owner and input")
        arg = arg_type(run_id=start.run_id, owner=start.owner, input=start.input)
    policies = merge_policies(kind.gate_policy, gate_policies_of(run))
    await client.start_workflow(
        workflow_type(kind.workflow), arg, id=run.workflow_id, task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        search_attributes=initial_search_attributes(run),
        static_summary=summary, static_details=details,
        task_timeout=kind.task_timeout,
        memo={GATE_POLICY_MEMO: _POLICIES.dump_python(policies, mode="json",
                                                      exclude_unset=True)} if policies else None)


def _fork_details(fork: ForkPoint) -> str:
    """A fork's source, as the Web UI's details show it."""
    where = f" (gate {fork.checkpoint})" if fork.checkpoint else ""
    decided = (f"; decision {fork.decision['decision']!r} applied first" if fork.decision
               else "")
    return (f"forked from run {fork.source_run_id}, snapshot {fork.snapshot} "
            f"{fork.label!r}{where}{decided}")


async def create_and_start(conn: asyncpg.Connection, client: Client, task_queue: str,
                           kind: RunKind, *, owner: str, input: Any, project_id: str | None,
                           idempotency_key: str | None, group_id: UUID | None = None,
                           gate_policies: GatePolicies | None = None, name: str | None = None,
                           reuse_in_progress: bool = True,
                           run_id: UUID | None = None,
                           fork: ForkPoint | None = None) -> tuple[RunRow, CreateOutcome]:
    """Write the run's row, then start its workflow: (run, outcome). The same idempotency
    key again returns the first run (409 when it was used for a different request); a `name`
    the group has in progress for this kind returns that run (409 unless `reuse_in_progress`).
    A `run_id` the caller chose (an AG-UI thread id) that is another run's answers 404, as that
    run would. A fork (`fork`) records where it came from in `forked_from`."""
    run_id = run_id or uuid.uuid4()
    input_json = input.model_dump(mode="json")
    policies_json = (_POLICIES.dump_python(gate_policies, mode="json", exclude_unset=True)
                     if gate_policies else None)
    try:
        run, outcome = await runs_repo.create_run(
            conn, run_id=run_id, kind=kind.name, owner=owner, group_id=group_id,
            workflow_id=kind.workflow_id(run_id), idempotency_key=idempotency_key,
            input=input_json, project_id=project_id, gate_policies=policies_json, name=name,
            forked_from=fork.forked_from if fork else None)
    except runs_repo.RunIdTaken as error:
        raise ApiError(404, "run_not_found", f"run {run_id} not found") from error
    if outcome == "replayed" and (run.kind != kind.name or run.input != input_json
                                  or run.group_id != group_id or run.name != name
                                  or run.gate_policies != policies_json
                                  or run.forked_from != (fork.forked_from if fork else None)):
        raise ApiError(409, "idempotency_key_reused",
                       "this Idempotency-Key was used for a different request")
    if outcome == "in_progress" and not reuse_in_progress:
        raise ApiError(409, "run_in_progress",
                       f"name: the group's {kind.name} run {name!r} is in progress (run "
                       f"{run.id}); give another name, or reuse_in_progress true to get it",
                       details=[{"loc": ["body", "name"], "msg": "in progress",
                                 "type": "run_in_progress", "run_id": str(run.id)}])
    if outcome == "created" or run.status == "pending":
        try:
            await start_run(client, task_queue, kind, run, fork=fork)
        except RPCError as error:
            if idempotency_key is None and error.status != RPCStatusCode.ALREADY_EXISTS:
                # Nobody can retry this exact run: record that it never started.
                await runs_repo.mark_failed_to_start(conn, run.id, error.message)
            if (refused := temporal_refusal(error, what="the run's start")) is not None:
                raise refused from error
            raise
    return run, outcome

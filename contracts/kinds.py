"""The run-kind descriptor: everything Waystation needs to know to host a kind of run.

A kind is one `RunKind` next to its workflow. The API builds `POST /runs` from the
registered kinds' input models, the worker registers their workflows and activities, and the
Temporal Web UI shows their summaries. Built-in kinds and plug-ins register the same way
(`waystation.registry`).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from contracts.gate_policy import GatePolicies

KIND_NAME = re.compile(r"^[a-z][a-z0-9_]{0,49}$")


class PluginError(Exception):
    """A plug-in cannot be loaded; the message names it and says why."""


@dataclass(frozen=True)
class RunStart:
    """A run the API has just written, about to start: what a kind builds its workflow
    argument and its Web UI summary from."""

    run_id: UUID
    owner: str
    input: Any  # the kind's validated input model
    project_id: str | None = None
    group_id: str | None = None


@dataclass(frozen=True)
class ForkPoint:
    """Where a forked run (`POST /runs/{id}/fork`) starts: a snapshot of its source run.

    - `state`: the snapshot's state (the kind's `_dump()` and the run's life, as stored).
    - `checkpoint`: the gate the source waited on when the snapshot was taken, or None.
    - `decision`: the decision to apply first to that gate (the fields of
      `waystation.sdk.DecisionInput`, its `decided_by` the fork's owner), or None to ask again.
    - `forked_from`: what the new run records (`runs.forked_from`); a workflow names it in its
      `run.started` event.
    """

    source_run_id: UUID
    snapshot: int
    label: str
    state: dict[str, Any]
    checkpoint: str | None
    decision: dict[str, Any] | None
    forked_from: dict[str, Any]


@dataclass(frozen=True)
class ForkSource:
    """What a kind's `fork_input` hook builds a fork's input from: the source run's id, status,
    the gate it waits on now and its stored input, the point, the fork request's `input` (None
    when it gave none), and the API's database connection (the caller's: row-level security
    applies to what it reads)."""

    run_id: UUID
    status: str
    waiting_on: str | None
    input: dict[str, Any]
    point: ForkPoint
    replacing: dict[str, Any] | None
    conn: Any


class ForkRefused(Exception):
    """A kind's `fork` hook cannot start from this point: answered as 422 `code`, naming
    `field` of the fork request (`from.snapshot`, `decision`, ...)."""

    def __init__(self, message: str, *, field: str, code: str = "fork_not_supported") -> None:
        super().__init__(message)
        self.message, self.field, self.code = message, field, code


def _no_activities(deps: Any) -> Sequence[Callable[..., Any]]:
    return ()


@dataclass(frozen=True)
class RunKind:
    """A kind of run.

    - `name`: what `POST /runs` takes as `kind` (lower case, digits, underscores).
    - `workflow`: the `@workflow.defn` class; it should inherit `waystation.sdk.RunWorkflow`.
    - `input_model`: the pydantic model of the request's `input` (refuse unknown fields).
    - `workflow_id_prefix`: the run's workflow id is this plus the run id.
    - `activities`: given the worker's `waystation.sdk.WorkerDeps`, the activity callables
      the workflow calls (the shared read-model activity is always registered).
    - `summary` / `details`: the Web UI's summary and details of a run.
    - `build_input`: the workflow's argument; by default the workflow's argument model built
      from `run_id`, `owner` and `input`.
    - `task_timeout`: a workflow task timeout other than Temporal's default.
    - `gate_policy`: default rules for its runs' gates, by checkpoint name or `*` (who
      decides, quorum, typed answers, reminders, escalation); a run's own rules override them.
    - `fork`: given the new run (its `RunStart`: the source's input, or the fork request's)
      and the `ForkPoint`, the workflow's argument for a run that carries on from that
      snapshot; it may raise `ForkRefused`. None: the kind cannot fork, and
      `POST /runs/{id}/fork` answers 422 `fork_not_supported` with `fork_refusal` as the why.
    - `fork_input`: the fork's input (the kind's input model), for a kind whose fork is more
      than the source's input with the request's `input` fields replaced (a batch fork reads
      the chosen items and their earlier outputs from the database); it may raise
      `ForkRefused`. None: that replacement.
    """

    name: str
    workflow: type
    input_model: type[BaseModel]
    workflow_id_prefix: str
    summary: Callable[[RunStart], str]
    details: Callable[[RunStart], str] | None = None
    activities: Callable[[Any], Sequence[Callable[..., Any]]] = _no_activities
    build_input: Callable[[RunStart], BaseModel] | None = None
    task_timeout: timedelta | None = None
    description: str = ""
    gate_policy: GatePolicies = field(default_factory=dict)
    fork: Callable[[RunStart, ForkPoint], BaseModel] | None = None
    fork_refusal: str = "this kind cannot start from another run's snapshot"
    fork_input: Callable[[ForkSource], Awaitable[BaseModel]] | None = None

    def workflow_id(self, run_id: object) -> str:
        return f"{self.workflow_id_prefix}{run_id}"


def shorten(text: str, limit: int = 80) -> str:
    """A Web UI summary's share of a longer text."""
    return text if len(text) <= limit else text[:limit] + "…"

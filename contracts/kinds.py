"""The run-kind descriptor: everything Waystation needs to know to host a kind of run.

A kind is one `RunKind` next to its workflow. The API builds `POST /runs` from the
registered kinds' input models, the worker registers their workflows and activities, and the
Temporal Web UI shows their summaries. Built-in kinds and plug-ins register the same way
(`waystation.registry`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
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

    def workflow_id(self, run_id: object) -> str:
        return f"{self.workflow_id_prefix}{run_id}"


def shorten(text: str, limit: int = 80) -> str:
    """A Web UI summary's share of a longer text."""
    return text if len(text) <= limit else text[:limit] + "…"

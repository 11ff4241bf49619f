"""The `agent` run kind: a registered PydanticAI agent as a durable conversation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from activities.agent_registry import agent_activities
from contracts.kinds import RunKind, RunStart, shorten
from workflows.agent import AgentRun
from workflows.agent_models import AgentInput


def _activities(deps: Any) -> Sequence[Callable[..., Any]]:
    # Every registered agent's model-request and tool-call activities (PydanticAI's own).
    return agent_activities()


def _summary(run: RunStart) -> str:
    inp: AgentInput = run.input
    opening = f": {shorten(inp.message, 60)}" if inp.message else ""
    return f"Agent {inp.agent} for {run.owner}{opening}"


def _details(run: RunStart) -> str:
    inp: AgentInput = run.input
    model = inp.model or "by the worker’s configuration"
    return (f"run {run.run_id} · agent {inp.agent} · model {model} · "
            f"approvals expire after {inp.approval_timeout_seconds} s "
            f"({inp.approval_expiry_policy})")


AGENT = RunKind(
    name="agent", workflow=AgentRun, input_model=AgentInput, workflow_id_prefix="agent-",
    summary=_summary, details=_details, activities=_activities,
    fork_refusal="forking an agent run (its transcript up to a turn) is not built yet",
    description="A PydanticAI agent as a durable conversation, with tool-call approvals "
                "(issue 12, seed 003).")

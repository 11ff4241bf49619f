"""The stable import surface for writing your own run kind (see docs/run-kinds.md).

Workflow side (import inside `workflow.unsafe.imports_passed_through()`):

- `RunWorkflow`: the base of a kind's workflow. `init_run(run_id)` in `__init__`;
  `await self.lifecycle(body)` in the run method; `await self.ask_human(make_spec, where=...)`
  for a gate (`GateSpec`, `GateOption`; decided through `POST /runs/{id}/decisions/...` like
  every gate, with the same Update validation, Signal, expiry policies and digest; a gate
  may ask for a typed answer, a quorum, named deciders, reminders and escalation);
  `self.event(...)` with `record(...)` / `stage(...)` for the run's events and snapshots;
  `await self.complete(result, stop_reason=...)` or `await self.fail(message, stop_reason=...)`;
  `await self.answer_decisions_first()` before a local activity of the kind's own, so a
  decision's Update answers before it rather than with it.
- `RunKind` / `RunStart`: the descriptor a plug-in registers under the entry-point group
  `waystation.run_kinds` (or lists in `RUN_KINDS` of a `WAYSTATION_PLUGINS` module);
  `GatePolicy` for its `gate_policy` defaults (a run's own `gates` override them);
  `ForkPoint` / `ForkRefused` for its `fork` hook (`POST /runs/{id}/fork`: a new run from a
  snapshot of another, a decision applied first with `ask_human(..., decided=...)`), and
  `ForkSource` for its `fork_input` hook (a fork's input read from the database);
  `StartCheck` for its `start_check` hook (refusing with `ApiError`, the API's one error
  shape), `ViewContext` for its `view` hook, `KindRetention` for its `retention` hook. The
  other hooks (`routers`, `migrations`, `worker_deps`, `console_module`, `metrics`,
  `mcp_tools`) take plain values, and `console_pages` takes `ConsolePage`s: see
  docs/run-kinds.md.

Worker side: `WorkerDeps` (what an activity factory receives: pool, agent backend), the agent
backend interface (`AgentBackend`, `AgentRequest`, `AgentResponse`) for plug-in backends
registered under `waystation.agent_backends`, and `replay_histories` for a plug-in's tests.

Agent side (your own agent for the `agent` kind, registered under `waystation.agents`; see
docs/agents.md, "Bring the agent you have"): `ConfiguredModel`, the PydanticAI capability that
makes a run naming no model follow the worker's model configuration and prices each request;
`MODEL_RETRY`, the bounded retry policy for its model-request activities; `SUMMARY_REQUEST`,
how the prompt starts by which a run asks the agent for its `context_summary` after each turn;
`RelatedEntities`, the capability that names the tools whose results hold the ids a run keeps
(`related_entity_ids`) and re-primes a returning member from; `local_tool`, a PydanticAI
`Tool` whose calls in a run are Temporal local activities (for fast, idempotent lookups).
A LangGraph graph imports from `waystation.langgraph` instead (`Approval`,
`configured_chat_model`), which needs LangGraph.
"""

from __future__ import annotations

from activities.agent_entities import RelatedEntities
from activities.agent_local_tools import local_tool
from activities.agent_model import MODEL_RETRY, ConfiguredModel
from activities.agents.base import AgentBackend, AgentRequest, AgentResponse, ProgressReporter
from activities.deps import WorkerDeps
from api.errors import ApiError
from contracts.agents import SUMMARY_REQUEST
from contracts.events import RUN_CANCELED, RUN_COMPLETED, RUN_FAILED, RUN_STARTED
from contracts.gate_policy import GatePolicy
from contracts.kinds import (
    ConsolePage,
    ForkPoint,
    ForkRefused,
    ForkSource,
    KindRetention,
    RunKind,
    RunResource,
    RunStart,
    StartCheck,
    ViewContext,
    shorten,
)
from contracts.statuses import GateStatus, RunStatus
from contracts.writes import EventWrite, GateOption
from waystation.replay import replay_histories
from workflows.gate_handlers import GateOutcome
from workflows.gate_rules import DecisionInput, GateSpec
from workflows.lifecycle import RunLife, RunWorkflow

__all__ = [
    "MODEL_RETRY", "RUN_CANCELED", "RUN_COMPLETED", "RUN_FAILED", "RUN_STARTED",
    "SUMMARY_REQUEST", "AgentBackend", "ApiError", "ConfiguredModel", "local_tool",
    "AgentRequest", "AgentResponse", "ConsolePage",
    "DecisionInput", "EventWrite", "ForkPoint", "ForkRefused",
    "ForkSource", "GateOption", "GateOutcome", "GatePolicy", "GateSpec", "GateStatus",
    "KindRetention", "ProgressReporter", "RelatedEntities", "RunKind", "RunLife", "RunResource",
    "RunStart", "RunStatus", "RunWorkflow", "StartCheck", "ViewContext", "WorkerDeps",
    "replay_histories", "shorten",
]

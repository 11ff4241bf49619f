"""The one import surface for writing a run kind (the contract: docs/run-kinds.md, "The SDK").

A kind, built in (`kinds/`) or a plug-in, imports from Waystation only this package and its
sub-modules; tests/unit/test_sdk_surface.py fails on any other import. Every object has one
address here, under its own name. This module holds what every part of a kind uses; the
sub-modules group the rest by concern, so a kind's imports say what it depends on:

- `waystation.sdk.workflow`: search attributes, the refusal codes of Update validators.
- `waystation.sdk.gates`: an open gate's rules and the budget gate.
- `waystation.sdk.writes`: read-model writes, appending events, retrying while the database is
  unavailable, the read-model activities.
- `waystation.sdk.reads`: a kind's SQL files, rows, a run and its events.
- `waystation.sdk.routes`: FastAPI dependencies and the API's schemas a kind's routes use.
- `waystation.sdk.services`: the caller (`User`), access checks, starting a run, a workflow
  Update, an agent run's messages.
- `waystation.sdk.mcp`: a kind's MCP tools.
- `waystation.sdk.agents`: calling a model backend, its usage and prices, checking an answer,
  publishing its tokens live.
- `waystation.sdk.artifacts`: where a kind's files are stored.
- `waystation.sdk.schemas`: checking a user's JSON Schema, patterns the API shares.
- `waystation.sdk.testing`: a local stack for a plug-in's tests.

Workflow side (every module here passes its imports through Temporal's sandbox, so a
workflow's module may import them at its top or inside `imports_passed_through()`):

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
  `waystation.run_kinds` (or lists in `RUN_KINDS` of a `WAYSTATION_PLUGINS` module), and
  `GatePolicy` for its `gate_policy` defaults (a run's own `gates` override them). What a
  kind adds is grouped by concern, each group a frozen dataclass documented where it is
  defined (contracts/kinds.py): `ApiHooks` (its routers, `start_check` with `StartCheck`
  refusing with `ApiError`, the API's one error shape; `view` with `ViewContext`;
  `messages` returning `KindMessages`; MCP tools and `RunResource`s;
  `run_filters`, `RunListFilter`s of the runs list over its own tables), `ConsoleHooks` (its
  module and `ConsolePage`s), `WorkerHooks` (its activities, worker dependencies,
  `configure` with `WorkerSetup`, `OfflineAnswer`s), `DataHooks` (its migrations,
  `KindRetention`, metrics), `ForkHooks` (`POST /runs/{id}/fork`: a new run from a snapshot
  of another, a `ForkPoint`, a decision applied first with `ask_human(..., decided=...)`;
  `ForkSource` for a fork's input read from the database; `ForkRefused`) and `CliHooks`
  (`CliCommand`s, `waystation` subcommands of its own, and its `KindDemo`). Its `settings`
  take a pydantic-settings `BaseSettings` class, read with `Settings.of`; its `agents` a
  `KindAgents` (agents registered by name). See docs/run-kinds.md.

Worker side: `WorkerDeps` (what an activity factory receives: pool, agent backend), the agent
backend interface (`AgentBackend`, `AgentRequest`, `AgentResponse`) for plug-in backends
registered under `waystation.agent_backends`, and `replay_histories` for a plug-in's tests.

The agent kind's own authoring surface (an agent registered under `waystation.agents`:
`ConfiguredModel`, `MODEL_RETRY`, `SUMMARY_REQUEST`, `RelatedEntities`, `local_tool`, ...) is
that kind's package: `waystation.kinds.agent.sdk`, `waystation.kinds.agent.langgraph`,
`waystation.kinds.agent.openai_agents` (docs/agents.md, "Bring the agent you have").
"""

from __future__ import annotations

from temporalio import workflow

# Passed through Temporal's sandbox: a sandboxed workflow that imports this at its top shares
# the worker's classes (a sandbox's own copy of `RunStateWrite` fails `ReadModelWrite`'s check).
with workflow.unsafe.imports_passed_through():
    from waystation.activities.agents.base import (
        AgentBackend,
        AgentRequest,
        AgentResponse,
        ProgressReporter,
    )
    from waystation.activities.agents.offline import OfflineAnswer
    from waystation.activities.deps import WorkerDeps
    from waystation.api.errors import ApiError, invalid_field
    from waystation.contracts.events import (
        AGENT_ANSWERED,
        MESSAGE_RECEIVED,
        RUN_CANCELED,
        RUN_COMPLETED,
        RUN_FAILED,
        RUN_STARTED,
        TOOL_CALLED,
        TOOL_RETRY,
        TOOL_RETURNED,
    )
    from waystation.contracts.gate_policy import GatePolicy
    from waystation.contracts.kinds import (
        ApiHooks,
        CliCommand,
        CliHooks,
        ConsoleHooks,
        ConsolePage,
        DataHooks,
        ForkHooks,
        ForkPoint,
        ForkRefused,
        ForkSource,
        KindAgents,
        KindDemo,
        KindMessages,
        KindRetention,
        PluginError,
        RunKind,
        RunListFilter,
        RunResource,
        RunStart,
        StartCheck,
        ViewContext,
        WorkerHooks,
        WorkerSetup,
        shorten,
    )
    from waystation.contracts.statuses import (
        TERMINAL_RUN_STATUSES,
        ExpiryPolicy,
        GateStatus,
        RunStatus,
    )
    from waystation.contracts.writes import EventWrite, GateOption
    from waystation.replay import replay_histories
    from waystation.settings import Settings
    from waystation.workflows.gate_handlers import GateOutcome
    from waystation.workflows.gate_rules import DecisionInput, GateSpec
    from waystation.workflows.lifecycle import RunLife, RunWorkflow

__all__ = [
    "AGENT_ANSWERED", "MESSAGE_RECEIVED", "RUN_CANCELED", "RUN_COMPLETED", "RUN_FAILED",
    "RUN_STARTED", "TERMINAL_RUN_STATUSES", "TOOL_CALLED", "TOOL_RETRY", "TOOL_RETURNED",
    "AgentBackend", "AgentRequest", "AgentResponse", "ApiError", "ApiHooks", "CliCommand",
    "CliHooks", "ConsoleHooks", "ConsolePage", "DataHooks", "DecisionInput", "EventWrite",
    "ExpiryPolicy", "ForkHooks", "ForkPoint", "ForkRefused", "ForkSource", "GateOption",
    "GateOutcome", "GatePolicy", "GateSpec", "GateStatus", "KindAgents", "KindDemo",
    "KindMessages", "KindRetention", "OfflineAnswer", "PluginError", "ProgressReporter",
    "RunKind", "RunLife", "RunListFilter", "RunResource", "RunStart", "RunStatus", "RunWorkflow",
    "Settings", "StartCheck", "ViewContext", "WorkerDeps", "WorkerHooks", "WorkerSetup",
    "invalid_field",
    "replay_histories", "shorten",
]

"""The run-kind descriptor: everything Waystation needs to know to host a kind of run.

A kind is one `RunKind` next to its workflow. The API builds `POST /runs` from the
registered kinds' input models, the worker registers their workflows and activities, and the
Temporal Web UI shows their summaries. Built-in kinds (`kinds/`) and plug-ins register the
same way (`waystation.registry`), and everything else a kind adds (routes, tables, checks,
console sections, metrics, retention, MCP tools, follow-up messages, agents, a worker's
setup, offline answers) goes through the hooks below, which the core calls for every
registered kind.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from waystation.contracts.gate_policy import GatePolicies

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


@dataclass(frozen=True)
class StartCheck:
    """What a kind's `start_check` hook sees of a run about to start (`POST /runs`, a fork):
    its validated `input` (the kind's input model), the caller (`user`: `.name`, `.role`,
    `.is_service`), the API's `settings` and the caller's database connection (`conn`:
    row-level security applies to what it reads)."""

    input: Any
    user: Any
    settings: Any
    conn: Any


@dataclass(frozen=True)
class ViewContext:
    """What a kind's `view` hook reads a run's view from: the caller's database connection
    and the run's row (`waystation.persistence.models.RunRow`)."""

    conn: Any
    run: Any


@dataclass(frozen=True)
class KindRetention:
    """A kind's share of the retention sweep, for rows of its own tables that belong to runs.

    - `archive(conn, run_ids)`: per run id, the sections its archive document gains
      (`{"job": ..., ...}`), read before anything is deleted.
    - `purge(conn, run_ids, limit)`: delete at most `limit` rows of the given runs from a table
      that grows with a run's length; returns how many it deleted (called until fewer than
      `limit`). Rows that go with the run by `ON DELETE CASCADE` need nothing here.
    - `forget_artifacts(conn, sha256s)`: the kind's rows stop pointing at these artifacts,
      whose files are deleted (no remaining run saw them); in the runs' delete transaction.
    """

    archive: Callable[[Any, list[UUID]], Awaitable[dict[UUID, dict[str, Any]]]] | None = None
    purge: Callable[[Any, list[UUID], int], Awaitable[int]] | None = None
    forget_artifacts: Callable[[Any, list[str]], Awaitable[None]] | None = None


@dataclass(frozen=True)
class ConsolePage:
    """A page of a kind's own in the console (`RunKind.console_pages`): `#/<name>` in the
    address bar, `title` in the navigation, `module` a JavaScript file (a path in the kind's
    package) served as `/console/static/kinds/<kind>/<name>.js`, whose exported
    `mount(main, session)` fills the page and may return a cleanup function."""

    name: str
    title: str
    module: Any


@dataclass(frozen=True)
class RunResource:
    """A resource of a run on the MCP endpoint that a kind adds (`RunKind.mcp_run_resources`):
    `waystation://runs/{run_id}<part>` (`part` such as `/graph`), read by `read(conn, run)`
    (the caller's connection, the visible run's row) as a JSON-able value; it may raise
    `ApiError` (404 when the run has no such thing)."""

    name: str
    part: str
    description: str
    read: Callable[[Any, Any], Awaitable[Any]]


@dataclass(frozen=True)
class CliCommand:
    """A `waystation` subcommand of a kind's own (`RunKind.cli_commands`), such as the mobile
    kind's `waystation simulator list`. `configure(parser)` adds its arguments (or
    subcommands) to its `argparse` parser; `run(settings, args)` does it and returns the exit
    status. The CLI refuses a name one of its own commands or another kind already has."""

    name: str
    help: str
    run: Callable[[Any, Any], int]
    configure: Callable[[Any], None] | None = None


@dataclass(frozen=True)
class KindDemo:
    """What `waystation demo --kind <name>` starts on a running stack (`RunKind.demo`):
    `input` is the `POST /runs` input. The CLI follows the run's event stream to its first
    gate and prints how to decide it; `follow(session, run_id)` replaces that walk (the
    agent kind converses first) and returns the run's view when it asks a human, and
    `hints(session, run)` adds lines after the decide command. `session` is a
    `waystation.demo.DemoSession` (its `http`, `api`, `token`, `follow(...)`)."""

    input: Mapping[str, Any]
    help: str = ""
    follow: Callable[[Any, str], dict[str, Any]] | None = None
    hints: Callable[[Any, dict[str, Any]], Sequence[str]] | None = None


@dataclass(frozen=True)
class KindMessages:
    """A kind whose runs take follow-up messages (a conversation: what `RunKind.messages`
    returns). The REST API, AG-UI, A2A and MCP send a message, read the conversation and tell
    whether a run waits for one through these, for a run of any kind that has them.

    - `send`: `async (conn, temporal, user, run, request, *, idempotency_key=None) ->
      waystation.api.schemas.MessageAccepted`, the one service function that sends the next message
      (`request`: an `waystation.api.schemas.MessageRequest`) to the run (its `waystation.persistence.models.RunRow`),
      as `user` over the caller's connection; it refuses with `ApiError` (409 when the run
      does not wait for one).
    - `transcript`: `async (conn, run, query) -> waystation.api.schemas.MessagePage`, the conversation
      so far (`query`: an `waystation.api.queries.TranscriptQuery`), its messages `waystation.contracts.events`'
      `MESSAGE_RECEIVED` and `AGENT_ANSWERED` (AG-UI's and A2A's user and agent messages).
    - `waiting`: `(run) -> bool`, whether the run (its `waystation.api.schemas.RunView`: `status`,
      `pending_checkpoint`, ...) waits for a message now.

    A new run's first message goes in its input model's `message` field, when it has one
    (A2A's text part, AG-UI's first user message).
    """

    send: Callable[..., Awaitable[Any]]
    transcript: Callable[[Any, Any, Any], Awaitable[Any]]
    waiting: Callable[[Any], bool]


@dataclass(frozen=True)
class KindAgents:
    """The agents a kind's runs carry, registered by name (`RunKind.agents`): the registry
    (`waystation.registry`) gives it those of the entry-point group `waystation.agents` and of
    `WAYSTATION_PLUGINS` modules' `AGENTS` dicts, and `waystation agents` lists them.

    - `register`: `(name, agent, source) -> object`, refusing what its runs cannot carry
      with `PluginError` (the message naming `source`).
    - `registered`: `() -> [agent]`, every registered agent (each with `name`, `framework`
      and `source`), the kind's own bundled agents registered first on the first call, so a
      plug-in cannot take their names.
    """

    register: Callable[[str, object, str], object]
    registered: Callable[[], Sequence[Any]]


@dataclass(frozen=True)
class WorkerSetup:
    """What a kind's `configure_worker` hook configures a worker process from: its `settings`
    (`waystation.settings.Settings`) and the `meter` its model calls are counted on
    (`waystation.activities.agents.metered.ModelMeter`: `waystation_model_*`)."""

    settings: Any
    meter: Any


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

    What a kind adds beyond a workflow (every hook optional; the core calls it for every
    registered kind and never names a kind itself):

    - `routers`: the FastAPI routers of the kind's own routes (`/jobs`, ...), as a callable
      so a worker never imports the API; they get the API's error responses and auth.
    - `migrations`: a folder (a `pathlib.Path` or `importlib.resources` Traversable) of
      `NNN_name.sql` files for the kind's own tables, applied by `waystation.persistence.migrate` in one
      global order with the core's (a version is taken once across all folders), once each,
      with the same checksums; a kind moved out of the core keeps its already-applied files
      in `persistence/migrations/`.
    - `start_check`: `async (StartCheck) -> None`, run before a run of the kind is written
      (`POST /runs`, a fork); refuses by raising `waystation.sdk.ApiError` (the API's one
      error shape: status, code, message, details).
    - `view`: `async (ViewContext) -> dict`, fields of `GET /runs/{id}`'s answer the kind
      fills in (a batch job's cost and tokens are counted on its items).
    - `worker_deps`: `(settings) -> object`, the kind's own dependencies, built once per
      worker from its `Settings`; its `activities` factory reads them as
      `deps.of(kind_name)`.
    - `console_module`: a JavaScript module file (a path in the kind's package) the console
      loads for a run of the kind (served as `/console/static/kinds/<name>.js`; it imports the
      console's modules as `../dom.js`, ...) and calls its exported
      `mount(slot, run, {onChange})`, which may return a cleanup function.
    - `metrics`: `async (conn) -> [prometheus Metric]`, the kind's read-model figures for
      `GET /metrics`, read in the same read-only transaction as the core's.
    - `retention`: a `KindRetention`, the kind's rows in the sweep's archive and deletion.
    - `mcp_run_resources`: resources of a run the kind adds on the MCP endpoint
      (`RunResource`s), as a callable so a worker never imports the API.
    - `console_pages`: pages of the kind's own in the console's navigation (`ConsolePage`).
    - `mcp_tools`: the kind's own MCP tools (`waystation.api.protocols.mcp.mapping.ToolSpec`s, listed
      after the core's), as a callable so a worker never imports the API.
    - `settings`: the kind's own settings, a pydantic-settings `BaseSettings` whose fields'
      `validation_alias`es name the environment variables it reads; its hooks read them from
      the core's settings as `settings.of(MySettings)`, and the API and the worker read them
      when they start, so a bad value stops them naming the variable.
    - `cli_commands`: `waystation` subcommands of the kind's own (`CliCommand`).
    - `demo`: what `waystation demo --kind <name>` starts and follows (`KindDemo`); the CLI's
      default demo is the first registered kind that has one.
    - `messages`: for a kind whose runs take follow-up messages, its `KindMessages` (how to
      send one, read the conversation, tell that a run waits for one: REST, AG-UI, A2A and
      MCP call them), as a callable so a worker never imports the API.
    - `agents`: a `KindAgents` for a kind whose runs carry agents registered by name (the
      `waystation.agents` entry points, `AGENTS` of `WAYSTATION_PLUGINS` modules).
    - `configure_worker`: `(WorkerSetup) -> None`, called once in a worker process before it
      starts (its model configuration, its model calls' accounting), not in the API.
    - `offline_answers`: task name -> `(context, feedback, rng) -> pydantic model`, the
      offline agent backend's typed answers to the kind's tasks, each annotated with the model
      it returns and given only to a request asking for that model's schema (any other request
      gets a value matching its own output schema, or a short text).
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
    routers: Callable[[], Sequence[Any]] | None = None
    migrations: Any = None
    start_check: Callable[[StartCheck], Awaitable[None]] | None = None
    view: Callable[[ViewContext], Awaitable[dict[str, Any]]] | None = None
    worker_deps: Callable[[Any], Any] | None = None
    console_module: Any = None
    metrics: Callable[[Any], Awaitable[Sequence[Any]]] | None = None
    retention: KindRetention | None = None
    mcp_tools: Callable[[], Sequence[Any]] | None = None
    console_pages: Sequence[ConsolePage] = ()
    mcp_run_resources: Callable[[], Sequence[RunResource]] | None = None
    settings: type[BaseModel] | None = None
    cli_commands: Sequence[CliCommand] = ()
    demo: KindDemo | None = None
    messages: Callable[[], KindMessages] | None = None
    agents: KindAgents | None = None
    configure_worker: Callable[[WorkerSetup], None] | None = None
    offline_answers: Mapping[str, Callable[..., BaseModel]] = field(default_factory=dict)

    def workflow_id(self, run_id: object) -> str:
        return f"{self.workflow_id_prefix}{run_id}"


def shorten(text: str, limit: int = 80) -> str:
    """A Web UI summary's share of a longer text."""
    return text if len(text) <= limit else text[:limit] + "…"

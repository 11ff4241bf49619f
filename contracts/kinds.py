"""The run-kind descriptor: everything Waystation needs to know to host a kind of run.

A kind is one `RunKind` next to its workflow. The API builds `POST /runs` from the
registered kinds' input models, the worker registers their workflows and activities, and the
Temporal Web UI shows their summaries. Built-in kinds (`kinds/`) and plug-ins register the
same way (`waystation.registry`), and everything else a kind adds goes through its optional
hooks, grouped by concern in small frozen dataclasses: what the API serves (`ApiHooks`), what
the console shows (`ConsoleHooks`), what a worker runs (`WorkerHooks`), its tables
(`DataHooks`), forks (`ForkHooks`) and the command line (`CliHooks`). The core calls them
for every registered kind, through the registry.
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
    """What a kind's `ForkHooks.input` builds a fork's input from: the source run's id, status,
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
    """A kind's fork hooks (`ForkHooks.start`, `ForkHooks.input`) cannot start from this
    point: answered as 422 `code`, naming `field` of the fork request (`from.snapshot`,
    `decision`, ...)."""

    def __init__(self, message: str, *, field: str, code: str = "fork_not_supported") -> None:
        super().__init__(message)
        self.message, self.field, self.code = message, field, code


@dataclass(frozen=True)
class StartCheck:
    """What a kind's `ApiHooks.start_check` sees of a run about to start (`POST /runs`, a fork):
    its validated `input` (the kind's input model), the caller (`user`: `.name`, `.role`,
    `.is_service`), the API's `settings` and the caller's database connection (`conn`:
    row-level security applies to what it reads)."""

    input: Any
    user: Any
    settings: Any
    conn: Any


@dataclass(frozen=True)
class ViewContext:
    """What a kind's `ApiHooks.view` reads a run's view from: the caller's database connection
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
    """A page of a kind's own in the console (`ConsoleHooks.pages`): `#/<name>` in the
    address bar, `title` in the navigation, `module` a JavaScript file (a path in the kind's
    package) served as `/console/static/kinds/<kind>/<name>.js`, whose exported
    `mount(main, session)` fills the page and may return a cleanup function."""

    name: str
    title: str
    module: Any


@dataclass(frozen=True)
class RunResource:
    """A resource of a run on the MCP endpoint that a kind adds (`ApiHooks.mcp_run_resources`):
    `waystation://runs/{run_id}<part>` (`part` such as `/graph`), read by `read(conn, run)`
    (the caller's connection, the visible run's row) as a JSON-able value; it may raise
    `ApiError` (404 when the run has no such thing)."""

    name: str
    part: str
    description: str
    read: Callable[[Any, Any], Awaitable[Any]]


@dataclass(frozen=True)
class RunListFilter:
    """A filter of the runs list a kind adds (`ApiHooks.run_filters`): `GET /runs?<name>=...`
    (a value matching `pattern`, at most `max_length` long, else 422 naming `query.<name>`)
    and a field of the console's runs page (`label`, `placeholder`). `runs` is a query of the
    kind's own tables selecting the ids of the runs the value keeps, the value as `$1` (its
    only parameter): the list reads `runs.id IN (<runs>)` with the caller's row-level
    security, so a kind's column never joins the core's `runs` table."""

    name: str
    label: str
    description: str
    runs: str
    pattern: str | None = None
    max_length: int = 200
    placeholder: str = ""


@dataclass(frozen=True)
class CliCommand:
    """A `waystation` subcommand of a kind's own (`CliHooks.commands`), such as the mobile
    kind's `waystation simulator list`. `configure(parser)` adds its arguments (or
    subcommands) to its `argparse` parser; `run(settings, args)` does it and returns the exit
    status. The CLI refuses a name one of its own commands or another kind already has."""

    name: str
    help: str
    run: Callable[[Any, Any], int]
    configure: Callable[[Any], None] | None = None


@dataclass(frozen=True)
class KindDemo:
    """What `waystation demo --kind <name>` starts on a running stack (`CliHooks.demo`):
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
    """A kind whose runs take follow-up messages (a conversation: what `ApiHooks.messages`
    returns). The REST API, AG-UI, A2A and MCP send a message, read the conversation and tell
    whether a run waits for one through these, for a run of any kind that has them.

    - `send`: `async (conn, temporal, user, run, request, *, idempotency_key=None) ->
      waystation.api.schemas.MessageAccepted`, the one service function that sends the next message
      (`request`: an `waystation.api.schemas.MessageRequest`) to the run (its
      `waystation.persistence.models.RunRow`), as `user` over the caller's connection; it refuses
      with `ApiError` (409 when the run does not wait for one).
    - `transcript`: `async (conn, run, query) -> waystation.api.schemas.MessagePage`, the
      conversation so far (`query`: an `waystation.api.queries.TranscriptQuery`), its messages
      `waystation.contracts.events`' `MESSAGE_RECEIVED` and `AGENT_ANSWERED` (AG-UI's and A2A's user
      and agent messages).
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
    """What a kind's `WorkerHooks.configure` configures a worker process from: its `settings`
    (`waystation.settings.Settings`) and the `meter` its model calls are counted on
    (`waystation.activities.agents.metered.ModelMeter`: `waystation_model_*`)."""

    settings: Any
    meter: Any


def _no_activities(deps: Any) -> Sequence[Callable[..., Any]]:
    return ()


# --- what a kind adds, grouped by concern ------------------------------------------------
#
# Every hook is optional, and the core calls it for every registered kind (never naming a
# kind itself), through the registry (`waystation.registry.Registry`): its methods read a hook
# of every kind at once (`routers()`, `migration_folders()`, ...), and `registry.kind(name)`
# gives one kind's groups. A hook given as a callable (`routers`, `mcp_tools`, ...) is called
# only by the process that needs it, so a worker never imports the API.


@dataclass(frozen=True)
class ApiHooks:
    """What the API serves for a kind (`RunKind.api`).

    - `routers`: `() -> [APIRouter]`, the kind's own routes (`/jobs`, ...); they get the API's
      error responses and auth.
    - `start_check`: `async (StartCheck) -> None`, run before a run of the kind is written
      (`POST /runs`, a fork); refuses by raising `waystation.sdk.ApiError` (the API's one
      error shape: status, code, message, details).
    - `view`: `async (ViewContext) -> dict`, fields of `GET /runs/{id}`'s answer the kind
      fills in (a batch job's cost and tokens are counted on its items), or adds (a mobile
      run's `app_package`, from its own table).
    - `run_filters`: filters of `GET /runs`, MCP's `list_runs` and the console's runs page the
      kind adds (`RunListFilter`), over its own tables.
    - `messages`: `() -> KindMessages`, for a kind whose runs take follow-up messages: how to
      send one, read the conversation, tell that a run waits for one (REST, AG-UI, A2A and MCP
      call them).
    - `mcp_tools`: `() -> [ToolSpec]`, the kind's own MCP tools
      (`waystation.api.protocols.mcp.mapping.ToolSpec`s, listed after the core's).
    - `mcp_run_resources`: `() -> [RunResource]`, resources of a run the kind adds on the MCP
      endpoint.
    """

    routers: Callable[[], Sequence[Any]] | None = None
    start_check: Callable[[StartCheck], Awaitable[None]] | None = None
    view: Callable[[ViewContext], Awaitable[dict[str, Any]]] | None = None
    messages: Callable[[], KindMessages] | None = None
    mcp_tools: Callable[[], Sequence[Any]] | None = None
    mcp_run_resources: Callable[[], Sequence[RunResource]] | None = None
    run_filters: Sequence[RunListFilter] = ()


@dataclass(frozen=True)
class ConsoleHooks:
    """What the web console shows of a kind (`RunKind.console`).

    - `module`: a JavaScript module file (a path or `importlib.resources` Traversable in the
      kind's package) the console loads for a run of the kind (served as
      `/console/static/kinds/<name>.js`; it imports the console's modules as `../dom.js`, ...)
      and calls its exported `mount(slot, run, {onChange})`, which may return a cleanup
      function.
    - `pages`: pages of the kind's own in the console's navigation (`ConsolePage`).
    """

    module: Any = None
    pages: Sequence[ConsolePage] = ()


@dataclass(frozen=True)
class WorkerHooks:
    """What a worker process runs and sets up for a kind (`RunKind.worker`).

    - `activities`: `(WorkerDeps) -> [callable]`, the activity callables the kind's workflow
      calls (the shared read-model activity is always registered).
    - `deps`: `(settings) -> object`, the kind's own dependencies, built once per worker from
      its `Settings`; its `activities` factory reads them as `deps.of(kind_name)`.
    - `configure`: `(WorkerSetup) -> None`, called once in a worker process before it starts
      (its model configuration, its model calls' accounting), not in the API.
    - `offline_answers`: task name -> `(context, feedback, rng) -> pydantic model`, the offline
      agent backend's typed answers to the kind's tasks, each annotated with the model it
      returns and given only to a request asking for that model's schema (any other request
      gets a value matching its own output schema, or a short text).
    """

    activities: Callable[[Any], Sequence[Callable[..., Any]]] = _no_activities
    deps: Callable[[Any], Any] | None = None
    configure: Callable[[WorkerSetup], None] | None = None
    offline_answers: Mapping[str, Callable[..., BaseModel]] = field(default_factory=dict)


@dataclass(frozen=True)
class DataHooks:
    """The kind's own tables and what is read from or swept out of them (`RunKind.data`).

    - `migrations`: a folder (a `pathlib.Path` or `importlib.resources` Traversable) of
      `NNN_name.sql` files for the kind's own tables, applied by `waystation.persistence.migrate`
      in one global order with the core's and every other kind's (a version is taken once across
      all folders), once each, with the same checksums. The first line of a migration that
      stands for core files of before the kinds owned their tables names them (`-- replaces:
      004 052`): a database those files reached records it as applied without running it
      (`waystation.persistence.before_the_move`).
    - `retention`: a `KindRetention`, the kind's rows in the retention sweep's archive and
      deletion.
    - `metrics`: `async (conn) -> [prometheus Metric]`, the kind's read-model figures for
      `GET /metrics`, read in the same read-only transaction as the core's.
    """

    migrations: Any = None
    retention: KindRetention | None = None
    metrics: Callable[[Any], Awaitable[Sequence[Any]]] | None = None


@dataclass(frozen=True)
class ForkHooks:
    """How a run of the kind starts from another's snapshot, `POST /runs/{id}/fork`
    (`RunKind.forks`).

    - `start`: given the new run (its `RunStart`: the source's input, or the fork's) and the
      `ForkPoint`, the workflow's argument for a run that carries on from that snapshot; it
      may raise `ForkRefused`. None: the kind cannot fork, and a fork answers 422
      `fork_not_supported` with `refusal` as the why.
    - `input`: `async (ForkSource) -> input model`, the fork's input, for a kind whose fork is
      more than the source's input with the request's `input` fields replaced (a batch fork
      reads the chosen items and their earlier outputs from the database); it may raise
      `ForkRefused`. None: that replacement.
    - `refusal`: why a kind without `start` cannot fork.
    """

    start: Callable[[RunStart, ForkPoint], BaseModel] | None = None
    input: Callable[[ForkSource], Awaitable[BaseModel]] | None = None
    refusal: str = "this kind cannot start from another run's snapshot"


@dataclass(frozen=True)
class CliHooks:
    """What the `waystation` command offers for a kind (`RunKind.cli`).

    - `commands`: `waystation` subcommands of the kind's own (`CliCommand`).
    - `demo`: what `waystation demo --kind <name>` starts and follows (`KindDemo`); the CLI's
      default demo is the first registered kind that has one.
    """

    commands: Sequence[CliCommand] = ()
    demo: KindDemo | None = None


@dataclass(frozen=True)
class RunKind:
    """A kind of run: what it is, then what it adds, grouped by concern.

    What it is:

    - `name`: what `POST /runs` takes as `kind` (lower case, digits, underscores).
    - `workflow`: the `@workflow.defn` class; it should inherit `waystation.sdk.RunWorkflow`.
    - `input_model`: the pydantic model of the request's `input` (refuse unknown fields).
    - `workflow_id_prefix`: the run's workflow id is this plus the run id.
    - `summary` / `details`: the Web UI's summary and details of a run.
    - `build_input`: the workflow's argument; by default the workflow's argument model built
      from `run_id`, `owner` and `input`.
    - `task_timeout`: a workflow task timeout other than Temporal's default.
    - `description`: one line for `GET /run-kinds`, the A2A card and MCP.
    - `gate_policy`: default rules for its runs' gates, by checkpoint name or `*` (who
      decides, quorum, typed answers, reminders, escalation); a run's own rules override them.
    - `settings`: the kind's own settings, a pydantic-settings `BaseSettings` whose fields'
      `validation_alias`es name the environment variables it reads; any hook reads them from
      the core's settings as `settings.of(MySettings)`, and the API and the worker read them
      when they start, so a bad value stops them naming the variable.
    - `agents`: a `KindAgents` for a kind whose runs carry agents registered by name (the
      `waystation.agents` entry points, `AGENTS` of `WAYSTATION_PLUGINS` modules).

    What it adds (each group documented where it is defined above): `api` (`ApiHooks`),
    `console` (`ConsoleHooks`), `worker` (`WorkerHooks`: its activities too), `data`
    (`DataHooks`), `forks` (`ForkHooks`), `cli` (`CliHooks`).
    """

    name: str
    workflow: type
    input_model: type[BaseModel]
    workflow_id_prefix: str
    summary: Callable[[RunStart], str]
    details: Callable[[RunStart], str] | None = None
    build_input: Callable[[RunStart], BaseModel] | None = None
    task_timeout: timedelta | None = None
    description: str = ""
    gate_policy: GatePolicies = field(default_factory=dict)
    settings: type[BaseModel] | None = None
    agents: KindAgents | None = None
    api: ApiHooks = field(default_factory=ApiHooks)
    console: ConsoleHooks = field(default_factory=ConsoleHooks)
    worker: WorkerHooks = field(default_factory=WorkerHooks)
    data: DataHooks = field(default_factory=DataHooks)
    forks: ForkHooks = field(default_factory=ForkHooks)
    cli: CliHooks = field(default_factory=CliHooks)

    def workflow_id(self, run_id: object) -> str:
        return f"{self.workflow_id_prefix}{run_id}"


def shorten(text: str, limit: int = 80) -> str:
    """A Web UI summary's share of a longer text."""
    return text if len(text) <= limit else text[:limit] + "…"

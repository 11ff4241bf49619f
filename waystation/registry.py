"""The one registry of run kinds, agent backends and agents: built-ins, entry points,
WAYSTATION_PLUGINS.

The built-in kinds are entry points too: the `waystation.run_kinds` group of Waystation's own
distribution (the root `pyproject.toml`), loaded first and always, also by
`load_registry(use_entry_points=False)`, which leaves out only other distributions' entry
points. So the core names no kind: adding a built-in kind is a package and one line in
`pyproject.toml` (then `pip install -e .` again, which rewrites the entry points).

A plug-in is a Python package that names its kinds in the entry-point group
`waystation.run_kinds` (a `RunKind`, a list of them, or a callable returning either), its
agent backends in `waystation.agent_backends` (a factory `(Settings) -> AgentBackend`) and its
agents in `waystation.agents` (an agent for a kind whose runs carry agents registered by name:
its `RunKind.agents` hook, which keeps them, and where its workflow finds them), or a module
listed in `WAYSTATION_PLUGINS` with `RUN_KINDS`, `AGENT_BACKENDS` and/or `AGENTS` attributes.
The API and the worker both load the registry when they start, and refuse to start when a
plug-in is broken, naming the plug-in and the problem.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings

from waystation.activities.agents.base import AgentBackend
from waystation.activities.agents.offline import OfflineAnswer
from waystation.contracts.kinds import (
    KIND_NAME,
    ConsolePage,
    KindAgents,
    KindMessages,
    KindRetention,
    PluginError,
    RunKind,
    RunListFilter,
    RunResource,
    WorkerSetup,
)
from waystation.workflows.definitions import is_workflow_class, workflow_type

KINDS_GROUP = "waystation.run_kinds"
BACKENDS_GROUP = "waystation.agent_backends"
AGENTS_GROUP = "waystation.agents"
DISTRIBUTION = "waystation"  # whose entry points are the built-ins
CONSOLE_PAGES_TAKEN = frozenset({"runs"})  # the console's own pages besides the inbox
BUILTIN_BACKENDS = ("offline", "noop", "openai")
RUN_FILTER_PARAMETER = re.compile(r"\$(\d+)")

BackendFactory = Callable[[Any], AgentBackend]
__all__ = ["PluginError", "Registered", "Registry", "load_registry"]


@dataclass(frozen=True)
class Registered:
    kind: RunKind
    source: str  # "builtin", "entry point NAME (DIST VERSION)", "WAYSTATION_PLUGINS module M"


@dataclass
class Registry:
    kinds: dict[str, Registered] = field(default_factory=dict)
    backends: dict[str, tuple[BackendFactory, str]] = field(default_factory=dict)

    def kind(self, name: str) -> RunKind:
        return self.kinds[name].kind

    @property
    def names(self) -> list[str]:
        return list(self.kinds)

    @property
    def agents(self) -> list[Any]:
        """Every kind's registered agents (`RunKind.agents`): `name`, `framework`, `source`."""
        return [agent for keeper in self.agent_keepers() for agent in keeper.registered()]

    def agent_keepers(self) -> list[KindAgents]:
        """The agents registries of the kinds whose runs carry agents (`RunKind.agents`)."""
        return [r.kind.agents for r in self.kinds.values() if r.kind.agents is not None]

    def add_agent(self, name: str, agent: object, source: str) -> None:
        """A plug-in's agent (`waystation.agents`, `AGENTS`), given to every kind that keeps
        agents; refused when none does."""
        keepers = self.agent_keepers()
        if not keepers:
            raise PluginError(f"{source}: agent {name!r}: no registered kind runs agents")
        for keeper in keepers:
            keeper.register(name, agent, source)

    # --- the kinds' hooks (contracts/kinds.py): the one way the core reads them. A hook of
    # every kind at once is a method here; one kind's hooks are `kind(name)`'s groups.

    def workflows(self) -> list[type]:
        return [r.kind.workflow for r in self.kinds.values()]

    def messages(self, kind: str) -> KindMessages | None:
        """The kind's follow-up messages (`ApiHooks.messages`), None when its runs take none."""
        hook = self.kinds[kind].kind.api.messages if kind in self.kinds else None
        return hook() if hook is not None else None

    def routers(self) -> list[Any]:
        """Every kind's own API routers (`ApiHooks.routers`), in registration order."""
        return [router for r in self.kinds.values() if r.kind.api.routers is not None
                for router in r.kind.api.routers()]

    def run_filters(self) -> list[RunListFilter]:
        """Every kind's own filters of the runs list (`ApiHooks.run_filters`)."""
        return [f for r in self.kinds.values() for f in r.kind.api.run_filters]

    def mcp_tools(self) -> list[Any]:
        """Every kind's own MCP tools (`ApiHooks.mcp_tools`), in registration order."""
        return [tool for r in self.kinds.values() if r.kind.api.mcp_tools is not None
                for tool in r.kind.api.mcp_tools()]

    def mcp_run_resources(self) -> list[RunResource]:
        """Every kind's own MCP run resources (`ApiHooks.mcp_run_resources`)."""
        return [resource for r in self.kinds.values() if r.kind.api.mcp_run_resources is not None
                for resource in r.kind.api.mcp_run_resources()]

    def console_pages(self) -> list[tuple[str, ConsolePage]]:
        """(kind name, page) of every kind's own console pages (`ConsoleHooks.pages`)."""
        return [(name, page) for name, r in self.kinds.items() for page in r.kind.console.pages]

    def console_modules(self) -> dict[str, Any]:
        """Kind name to the JavaScript file of its console section (`ConsoleHooks.module`)."""
        return {name: r.kind.console.module for name, r in self.kinds.items()
                if r.kind.console.module is not None}

    def activities(self, deps: Any) -> list[Callable[..., Any]]:
        """Every kind's activities (`WorkerHooks.activities`), given the worker's deps."""
        return [a for r in self.kinds.values() for a in r.kind.worker.activities(deps)]

    def worker_deps(self, settings: Any) -> dict[str, Any]:
        """Kind name to its own worker dependencies (`WorkerHooks.deps`), built now."""
        return {name: r.kind.worker.deps(settings) for name, r in self.kinds.items()
                if r.kind.worker.deps is not None}

    def configure_worker(self, setup: WorkerSetup) -> None:
        """Every kind's set-up of this worker process (`WorkerHooks.configure`)."""
        for r in self.kinds.values():
            if r.kind.worker.configure is not None:
                r.kind.worker.configure(setup)

    def offline_answers(self) -> dict[str, OfflineAnswer]:
        """Every kind's typed offline answers by task name (`WorkerHooks.offline_answers`); the
        kind registered first answers a task two of them name."""
        answers: dict[str, OfflineAnswer] = {}
        for r in self.kinds.values():
            for task, answer in r.kind.worker.offline_answers.items():
                answers.setdefault(task, answer)
        return answers

    def migration_folders(self) -> list[Any]:
        """Every kind's own migrations folder (`DataHooks.migrations`)."""
        return [r.kind.data.migrations for r in self.kinds.values()
                if r.kind.data.migrations is not None]

    def retention(self) -> list[KindRetention]:
        """Every kind's share of the retention sweep (`DataHooks.retention`)."""
        return [r.kind.data.retention for r in self.kinds.values()
                if r.kind.data.retention is not None]

    def metrics(self) -> list[Callable[[Any], Awaitable[Sequence[Any]]]]:
        """Every kind's read-model figures for `/metrics` (`DataHooks.metrics`)."""
        return [r.kind.data.metrics for r in self.kinds.values() if r.kind.data.metrics is not None]

    def check_settings(self, settings: Any) -> None:
        """Read every kind's own settings (`RunKind.settings`), so a bad value stops the API
        or the worker at start, naming the variable, rather than failing a request."""
        for name, registered in self.kinds.items():
            if registered.kind.settings is not None:
                try:
                    settings.of(registered.kind.settings)
                except ValidationError as error:
                    raise PluginError(f"{registered.source}: kind {name!r}'s settings: "
                                      f"{error}") from None

    def add_kind(self, kind: object, source: str) -> None:
        if not isinstance(kind, RunKind):
            raise PluginError(f"{source}: {kind!r} is not a waystation RunKind")
        if not KIND_NAME.match(kind.name):
            raise PluginError(f"{source}: kind name {kind.name!r} must match {KIND_NAME.pattern}")
        if kind.name in self.kinds:
            raise PluginError(f"{source}: kind name {kind.name!r} is taken "
                              f"(registered by {self.kinds[kind.name].source})")
        if not (isinstance(kind.input_model, type) and issubclass(kind.input_model, BaseModel)):
            raise PluginError(f"{source}: kind {kind.name!r}: input_model "
                              f"{kind.input_model!r} is not a pydantic model")
        if not is_workflow_class(kind.workflow):
            raise PluginError(f"{source}: kind {kind.name!r}: {kind.workflow!r} is not a "
                              "@workflow.defn class")
        for other in self.kinds.values():
            if other.kind.workflow_id_prefix == kind.workflow_id_prefix:
                raise PluginError(f"{source}: kind {kind.name!r}: workflow id prefix "
                                  f"{kind.workflow_id_prefix!r} is taken by {other.kind.name!r}")
            if workflow_type(other.kind.workflow) == workflow_type(kind.workflow):
                raise PluginError(f"{source}: kind {kind.name!r}: workflow type "
                                  f"{workflow_type(kind.workflow)!r} "
                                  f"is taken by {other.kind.name!r}")
        if kind.settings is not None and not (isinstance(kind.settings, type)
                                              and issubclass(kind.settings, BaseSettings)):
            raise PluginError(f"{source}: kind {kind.name!r}: settings {kind.settings!r} is "
                              "not a pydantic-settings BaseSettings")
        filters = {f.name for f in self.run_filters()}
        for run_filter in kind.api.run_filters:
            if not KIND_NAME.match(run_filter.name) or run_filter.name in filters:
                raise PluginError(f"{source}: kind {kind.name!r}: run filter name "
                                  f"{run_filter.name!r} is taken or not {KIND_NAME.pattern}")
            if set(RUN_FILTER_PARAMETER.findall(run_filter.runs)) != {"1"}:
                raise PluginError(f"{source}: kind {kind.name!r}: run filter "
                                  f"{run_filter.name!r}'s query must take the value as $1, "
                                  "its only parameter")
        pages = {page.name for _, page in self.console_pages()}
        for page in kind.console.pages:
            if not KIND_NAME.match(page.name) or page.name in CONSOLE_PAGES_TAKEN | pages:
                raise PluginError(f"{source}: kind {kind.name!r}: console page name "
                                  f"{page.name!r} is taken or not {KIND_NAME.pattern}")
        self.kinds[kind.name] = Registered(kind, source)

    def add_backend(self, name: str, factory: object, source: str) -> None:
        if not callable(factory):
            raise PluginError(f"{source}: agent backend {name!r} is not a factory")
        if name in BUILTIN_BACKENDS or name in self.backends:
            taken = self.backends[name][1] if name in self.backends else "builtin"
            raise PluginError(f"{source}: agent backend name {name!r} is taken ({taken})")
        self.backends[name] = (factory, source)


def _entry_point_order(ep: Any) -> tuple[str, str]:
    return ep.name, ep.dist.name if ep.dist is not None else ""


def load_registry(plugin_modules: Iterable[str] = (), *,
                  use_entry_points: bool = True) -> Registry:
    """Built-in kinds, then entry points, then WAYSTATION_PLUGINS modules, in that order."""
    registry = Registry()
    for kind in builtin_kinds():
        registry.add_kind(kind, "builtin")
    for keeper in registry.agent_keepers():
        keeper.registered()  # the kinds' bundled agents first: no plug-in takes their names
    if use_entry_points:
        # By name: the order distributions are found on the path is the file system's, and
        # the kinds' order is what `POST /runs`, `waystation kinds` and the console list.
        for ep in sorted(entry_points(group=KINDS_GROUP), key=_entry_point_order):
            if _is_builtin(ep):
                continue
            source = _describe(ep)
            for kind in _kinds_of(_load(ep.load, source), source):
                registry.add_kind(kind, source)
        for ep in entry_points(group=BACKENDS_GROUP):
            registry.add_backend(ep.name, _load(ep.load, _describe(ep)), _describe(ep))
        for ep in entry_points(group=AGENTS_GROUP):
            registry.add_agent(ep.name, _load(ep.load, _describe(ep)), _describe(ep))
    for module_name in plugin_modules:
        source = f"WAYSTATION_PLUGINS module {module_name}"
        module = _load(functools.partial(importlib.import_module, module_name), source)
        kinds = getattr(module, "RUN_KINDS", None)
        backends = getattr(module, "AGENT_BACKENDS", None)
        agents = getattr(module, "AGENTS", None)
        if kinds is None and backends is None and agents is None:
            raise PluginError(f"{source}: defines none of RUN_KINDS, AGENT_BACKENDS, AGENTS")
        for kind in _kinds_of(kinds or [], source):
            registry.add_kind(kind, source)
        for name, agent in (agents or {}).items():
            registry.add_agent(name, agent, source)
        for name, factory in (backends or {}).items():
            registry.add_backend(name, factory, source)
    return registry


@functools.cache
def builtin_kinds() -> tuple[RunKind, ...]:
    """The kinds Waystation's own distribution names in `waystation.run_kinds`, in the order
    of the root `pyproject.toml`."""
    kinds: list[RunKind] = []
    for ep in entry_points(group=KINDS_GROUP):
        if _is_builtin(ep):
            kinds.extend(_kinds_of(_load(ep.load, _describe(ep)), _describe(ep)))
    if not kinds:
        raise PluginError(f"the {DISTRIBUTION} distribution names no {KINDS_GROUP} entry "
                          "points: its metadata is stale; run `pip install -e .` again")
    return tuple(kinds)


def _is_builtin(ep: Any) -> bool:
    dist = getattr(ep, "dist", None)
    return dist is not None and dist.name.lower() == DISTRIBUTION


def _describe(ep: Any) -> str:
    dist = f" ({ep.dist.name} {ep.dist.version})" if getattr(ep, "dist", None) else ""
    return f"entry point {ep.group}:{ep.name} = {ep.value}{dist}"


def _load(load: Callable[[], Any], source: str) -> Any:
    try:
        return load()
    except Exception as error:  # any import-time failure of foreign code
        raise PluginError(f"{source}: failed to import: {type(error).__name__}: {error}") \
            from error


def _kinds_of(value: Any, source: str) -> list[Any]:
    if callable(value) and not isinstance(value, RunKind | type):
        value = _load(value, source)
    return list(value) if isinstance(value, list | tuple) else [value]

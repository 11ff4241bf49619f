"""The agents an `agent` run may name: built-in ones and those plug-ins register, each with
its framework and where it came from.

A registered agent is an agent of a framework Waystation runs durably (`FRAMEWORKS`): a
`pydantic_ai.Agent` carrying the `TemporalDurability` capability (so, inside a workflow, its
model requests and tool calls are activities), a compiled LangGraph graph whose nodes say
where they run (waystation.kinds.agent.activities.langgraph: its nodes become activities), or an
OpenAI Agents SDK `agents.Agent` (waystation.kinds.agent.activities.openai: its model calls and
activity tools are activities, through Temporal's OpenAI Agents integration). The registry
(`waystation.registry`) adds the agents of the entry-point group `waystation.agents` and of
`WAYSTATION_PLUGINS` modules (`AGENTS = {"name": agent}`) when the API or the worker starts;
the API then refuses a run naming any other, and the worker registers every agent's
activities. The workflow finds its agent here by name, in the same process.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai.agent import AbstractAgent
from pydantic_ai.durable_exec.temporal import TemporalDurability, worker_registrations

from waystation.kinds.agent.activities.local_tools import local_tool_activities
from waystation.sdk import PluginError

# The frameworks whose agents a run can carry (docs/agents.md, "Bring the agent you have");
# each adds one adapter, not a second run kind.
Framework = Literal["pydantic_ai", "langgraph", "openai_agents"]
FRAMEWORKS: tuple[Framework, ...] = ("pydantic_ai", "langgraph", "openai_agents")
BUILTIN = "builtin"
BUILTIN_AGENTS = {"planner": "waystation.kinds.agent.planner.agent:planner"}


@dataclass(frozen=True)
class RegisteredAgent:
    name: str
    framework: Framework
    # "builtin", "entry point waystation.agents:NAME = MODULE:ATTR (DIST VERSION)" or
    # "WAYSTATION_PLUGINS module M"
    source: str
    # A PydanticAI agent, or a graph's or an OpenAI agent's registered form
    # (waystation.kinds.agent.activities.langgraph, waystation.kinds.agent.activities.openai).
    agent: Any
    # What was registered (for a graph, the compiled graph; its form above is built from it).
    registered: object


_agents: dict[str, RegisteredAgent] = {}


def register_agent(name: str, agent: object, source: str) -> RegisteredAgent:
    """Register `agent` under `name`, refusing (PluginError) what no run could carry."""
    taken = _agents.get(name)
    if taken is not None and taken.registered is agent:
        return taken
    if _is_graph(agent):
        return _register_graph(name, agent, source, taken)
    if _is_openai_agent(agent):
        return _register_openai_agent(name, agent, source, taken)
    if not isinstance(agent, AbstractAgent):
        raise PluginError(f"{source}: agent {name!r} ({type(agent).__module__}."
                          f"{type(agent).__qualname__}) is not an agent of a framework "
                          f"Waystation runs ({', '.join(FRAMEWORKS)})")
    if TemporalDurability.from_agent(agent) is None:
        raise PluginError(f"{source}: agent {name!r} has no TemporalDurability capability, so "
                          "its model requests and tool calls would not be durable: add "
                          "capabilities=[TemporalDurability()] to its Agent(...) (from "
                          "pydantic_ai.durable_exec.temporal)")
    _refuse_taken(name, source, taken)
    durable = _durable_name(agent)
    for other in _agents.values():
        # The durable name is in the names of the agent's activities: two agents sharing one
        # would register the same activities, and the worker could not start.
        if other.framework == "pydantic_ai" and other.agent is not agent \
                and _durable_name(other.agent) == durable:
            raise PluginError(f"{source}: agent {name!r} has the durable name {durable!r} of "
                              f"agent {other.name!r} ({other.source}): give it another "
                              "Agent(name=...) or TemporalDurability(name=...)")
    registered = RegisteredAgent(name, "pydantic_ai", source, agent, agent)
    _agents[name] = registered
    return registered


def _refuse_taken(name: str, source: str, taken: RegisteredAgent | None) -> None:
    if taken is not None:
        raise PluginError(f"{source}: agent name {name!r} is taken (registered by "
                          f"{taken.source})")


def _is_graph(agent: object) -> bool:
    # Asked by the object's module, so an installation without LangGraph never imports it.
    return type(agent).__module__.startswith("langgraph.")


def _register_graph(name: str, graph: object, source: str,
                    taken: RegisteredAgent | None) -> RegisteredAgent:
    _refuse_taken(name, source, taken)
    for other in _agents.values():
        # Registering wraps the graph's nodes as activities named after the agent: a second
        # name would wrap them again.
        if other.registered is graph:
            raise PluginError(f"{source}: graph {name!r} is registered already as "
                              f"{other.name!r} ({other.source})")
    from waystation.kinds.agent.activities.langgraph import durable_graph

    registered = RegisteredAgent(name, "langgraph", source, durable_graph(name, graph, source),
                                 graph)
    _agents[name] = registered
    return registered


def _is_openai_agent(agent: object) -> bool:
    # Asked by the object's module, so an installation without the SDK never imports it.
    return type(agent).__module__.startswith("agents.")


def _register_openai_agent(name: str, agent: object, source: str,
                           taken: RegisteredAgent | None) -> RegisteredAgent:
    _refuse_taken(name, source, taken)
    from waystation.kinds.agent.activities.openai import durable_agent

    registered = RegisteredAgent(name, "openai_agents", source,
                                 durable_agent(name, agent, source), agent)
    _agents[name] = registered
    return registered


def _durable_name(agent: AbstractAgent[Any, Any]) -> str | None:
    durability = TemporalDurability.from_agent(agent)
    return durability.name if durability is not None else None


def register_builtin_agents() -> None:
    """The bundled agents, first: so a plug-in cannot take their names."""
    for name, path in BUILTIN_AGENTS.items():
        if name not in _agents:
            module, _, attr = path.partition(":")
            register_agent(name, getattr(importlib.import_module(module), attr), BUILTIN)


def registered_agents() -> list[RegisteredAgent]:
    """Every registered agent, by name."""
    register_builtin_agents()
    return [_agents[name] for name in sorted(_agents)]


def agent_names() -> list[str]:
    return [registered.name for registered in registered_agents()]


def agent_named(name: str) -> RegisteredAgent:
    register_builtin_agents()
    return _agents[name]


def agent_activities() -> list[Callable[..., Any]]:
    """Every registered agent's model-request and tool-call activities (a graph's: its nodes'),
    for the worker."""
    found: list[Callable[..., Any]] = []
    names: set[str] = set()
    for registered in registered_agents():
        if registered.framework == "langgraph":
            found.extend(registered.agent.activities)
            continue
        if registered.framework == "openai_agents":
            from waystation.kinds.agent.activities.openai import model_activities

            for fn in [*model_activities(), *registered.agent.activities]:
                # One model activity for every OpenAI agent; a tool shared by two agents once.
                name = getattr(fn, "__temporal_activity_definition").name
                if name not in names:
                    names.add(name)
                    found.append(fn)
            continue
        durability = TemporalDurability.from_agent(registered.agent)
        assert durability is not None, "checked when registered"
        found.extend(worker_registrations(durability)[0])
        for fn in local_tool_activities(registered.agent):
            # A local tool shared by two agents once.
            name = getattr(fn, "__temporal_activity_definition").name
            if name not in names:
                names.add(name)
                found.append(fn)
    return found

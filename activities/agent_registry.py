"""The PydanticAI agents an `agent` run may name: built-in ones and those plug-ins register.

An agent is a `pydantic_ai.Agent` carrying the `TemporalDurability` capability (so, inside a
workflow, its model requests and tool calls are activities). The registry
(`waystation.registry`) adds the agents of the entry-point group `waystation.agents` and of
`WAYSTATION_PLUGINS` modules (`AGENTS = {"name": agent}`) when the API or the worker starts;
the API then refuses a run naming any other, and the worker registers every agent's activities.
The workflow finds its agent here by name, in the same process.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from pydantic_ai.agent import AbstractAgent
from pydantic_ai.durable_exec.temporal import TemporalDurability, worker_registrations

from contracts.kinds import PluginError

BUILTIN_AGENTS = {"planner": "activities.planner.agent:planner"}
_agents: dict[str, AbstractAgent[Any, Any]] = {}


def register_agent(name: str, agent: object, source: str) -> None:
    if not isinstance(agent, AbstractAgent):
        raise PluginError(f"{source}: agent {name!r} is not a PydanticAI agent")
    if TemporalDurability.from_agent(agent) is None:
        raise PluginError(f"{source}: agent {name!r} has no TemporalDurability capability "
                          "(add capabilities=[TemporalDurability()])")
    if name in _agents and _agents[name] is not agent:
        raise PluginError(f"{source}: agent name {name!r} is taken")
    _agents[name] = agent


def _builtins() -> None:
    for name, path in BUILTIN_AGENTS.items():
        if name not in _agents:
            module, _, attr = path.partition(":")
            register_agent(name, getattr(importlib.import_module(module), attr), "builtin")


def agent_names() -> list[str]:
    _builtins()
    return sorted(_agents)


def agent_named(name: str) -> AbstractAgent[Any, Any]:
    _builtins()
    return _agents[name]


def agent_activities() -> list[Callable[..., Any]]:
    """Every registered agent's model-request and tool-call activities, for the worker."""
    found: list[Callable[..., Any]] = []
    for name in agent_names():
        durability = TemporalDurability.from_agent(_agents[name])
        assert durability is not None, "checked when registered"
        found.extend(worker_registrations(durability)[0])
    return found

"""The run-kind registry: built-ins, entry points and WAYSTATION_PLUGINS, and broken plug-ins
refused with a message that names the plug-in and the problem."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from waystation.contracts.kinds import PluginError
from waystation.registry import load_registry
from waystation.settings import Settings
from waystation.worker import agent_backend

WAYSTATION = str(Path(sys.executable).parent / "waystation")
ROOT = Path(__file__).resolve().parents[2]


def test_builtins_and_the_installed_example_plugin_are_registered() -> None:
    registry = load_registry()
    assert registry.names[:3] == ["validation", "batch", "agent"]
    assert registry.kinds["validation"].source == "builtin"
    # The mobile kind is a distribution of its own (kinds/mobile), registered as a plug-in.
    assert "(waystation-mobile 0.1.0)" in registry.kinds["mobile_agent"].source
    assert "entry point waystation.run_kinds:content_review" in \
        registry.kinds["content_review"].source
    assert "house_style" in registry.backends


@pytest.mark.parametrize("module, problem", [
    ("tests.plugin_samples.broken",
     "failed to import: RuntimeError: this plug-in is broken on purpose"),
    ("tests.plugin_samples.taken_name",
     "kind name 'validation' is taken (registered by builtin)"),
    ("tests.plugin_samples.not_pydantic", "is not a pydantic model"),
    ("tests.plugin_samples.missing", "failed to import: ModuleNotFoundError"),
    ("tests.plugin_samples.agent_not_durable",
     "agent 'forgetful' has no TemporalDurability capability, so its model requests and tool "
     "calls would not be durable: add capabilities=[TemporalDurability()]"),
    ("tests.plugin_samples.agent_unknown_framework",
     "agent 'home_made' (tests.plugin_samples.agent_unknown_framework.HomeMadeAgent) is not an "
     "agent of a framework Waystation runs (pydantic_ai, langgraph, openai_agents)"),
    ("tests.plugin_samples.agent_openai_bare_tool",
     "agent 'bare_tool': tool <function lookup"),
    ("tests.plugin_samples.agent_graph_node_unplaced",
     "graph 'unplaced' node 'answer' does not say where it runs: add metadata={'execute_in': "
     "'activity'}"),
    ("tests.plugin_samples.agent_graph_not_compiled",
     "agent 'uncompiled' is a StateGraph, not a compiled StateGraph: register "
     "builder.compile()"),
    ("tests.plugin_samples.agent_durable_name_taken",
     "agent 'second_planner' has the durable name 'planner' of agent 'planner' (builtin): give "
     "it another Agent(name=...)"),
])
def test_broken_plugins_are_refused_naming_plugin_and_problem(module: str, problem: str) -> None:
    with pytest.raises(PluginError) as refused:
        load_registry([module], use_entry_points=False)
    assert f"WAYSTATION_PLUGINS module {module}" in str(refused.value)
    assert problem in str(refused.value)


def test_plugin_backend_is_chosen_by_name() -> None:
    registry = load_registry(["tests.plugin_samples.backend_only"], use_entry_points=False)
    settings = Settings(agent_backend="sample_noop")  # type: ignore[call-arg]
    assert agent_backend(settings, registry).name == "noop"


# The API and the worker in the quick tiers; the CLI's listings, the same refusal on the same
# path, with the slow tier (each is a process importing the whole API, 4 s).
@pytest.mark.parametrize("command", [["api"], ["worker"],
                                     pytest.param(["kinds"], marks=pytest.mark.slow),
                                     pytest.param(["agents"], marks=pytest.mark.slow)])
def test_api_worker_and_cli_refuse_to_start_with_a_broken_plugin(command: list[str],
                                                                 tmp_path: Path) -> None:
    env = {**os.environ, "WAYSTATION_PLUGINS": "tests.plugin_samples.taken_name",
           "WAYSTATION_DATA_DIR": str(tmp_path), "DATABASE_URL": "postgresql://nowhere:1/x",
           "PYTHONPATH": str(ROOT)}  # where tests.plugin_samples lives
    done = subprocess.run([WAYSTATION, *command], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stderr
    assert "plug-in error: WAYSTATION_PLUGINS module tests.plugin_samples.taken_name: kind " \
           "name 'validation' is taken" in done.stderr


def test_waystation_kinds_lists_every_kind_with_its_source() -> None:
    done = subprocess.run([WAYSTATION, "kinds"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "WAYSTATION_PLUGINS": ""})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.split()[:2] == ["validation", "ValidationRun"] and "builtin" in line
               for line in lines)
    assert any(line.startswith("content_review ") and "waystation-content-review" in line
               for line in lines)


def test_waystation_agents_lists_every_agent_with_its_framework_and_source() -> None:
    done = subprocess.run([WAYSTATION, "agents"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "WAYSTATION_PLUGINS": ""})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["AGENT", "FRAMEWORK", "SOURCE"]
    assert ["planner", "pydantic_ai", "builtin"] in [line.split() for line in lines]
    assert any(line.split()[:2] == ["refunds", "pydantic_ai"]
               and "entry point waystation.agents:refunds" in line
               and "waystation-pydantic-ai-agent" in line for line in lines)
    assert any(line.split()[:2] == ["refunds_graph", "langgraph"]
               and "entry point waystation.agents:refunds_graph" in line
               and "waystation-langgraph-agent" in line for line in lines)
    assert any(line.split()[:2] == ["refunds_desk", "openai_agents"]
               and "entry point waystation.agents:refunds_desk" in line
               and "waystation-openai-agents-agent" in line for line in lines)


def test_an_agent_without_durability_stops_the_worker_saying_what_to_add(
        tmp_path: Path) -> None:
    env = {**os.environ, "WAYSTATION_PLUGINS": "tests.plugin_samples.agent_not_durable",
           "WAYSTATION_DATA_DIR": str(tmp_path), "DATABASE_URL": "postgresql://nowhere:1/x",
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([WAYSTATION, "worker"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stderr
    assert "agent 'forgetful' has no TemporalDurability capability" in done.stderr
    assert "add capabilities=[TemporalDurability()]" in done.stderr


def test_a_kind_s_run_filter_is_refused_when_taken_or_not_one_parameter() -> None:
    """`ApiHooks.run_filters`: a name once across the kinds, the value the query's only `$1`."""
    from dataclasses import replace

    from waystation.contracts.kinds import ApiHooks, RunListFilter
    from waystation.kinds.batch.kind import BATCH
    from waystation.kinds.validation.kind import VALIDATION
    from waystation.registry import Registry

    by_idea = RunListFilter(name="idea", label="Idea", description="",
                            runs="SELECT id FROM runs WHERE input->>'idea' = $1")
    registry = Registry()
    registry.add_kind(replace(VALIDATION, api=ApiHooks(run_filters=[by_idea])), "first")
    assert [f.name for f in registry.run_filters()] == ["idea"]
    with pytest.raises(PluginError, match="run filter name 'idea' is taken"):
        registry.add_kind(replace(BATCH, api=replace(BATCH.api, run_filters=[by_idea])), "second")
    two = replace(by_idea, name="two", runs="SELECT id FROM runs WHERE owner = $1 OR kind = $2")
    with pytest.raises(PluginError, match="must take the value as \\$1, its only parameter"):
        registry.add_kind(replace(BATCH, api=replace(BATCH.api, run_filters=[two])), "third")
    assert list(registry.kinds) == ["validation"]


def test_a_kind_s_run_filter_may_not_take_a_name_of_the_runs_list() -> None:
    from waystation.api.queries import RunFilter, run_filter_model
    from waystation.contracts.kinds import RunListFilter

    status = RunListFilter(name="status", label="Status", description="", runs="SELECT $1")
    with pytest.raises(PluginError, match=r"run filter names \['status'\] are the runs list's"):
        run_filter_model([status], RunFilter)

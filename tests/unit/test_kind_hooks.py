"""The public `RunKind` hooks the core calls for every registered kind: migrations in one
global order, routers, console sections, start checks, worker dependencies, CLI commands,
demos, settings."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest
from pydantic import Field
from pydantic_settings import BaseSettings

from waystation import cli
from waystation.contracts.kinds import CliCommand, CliHooks, PluginError, RunKind
from waystation.kinds.batch.settings import BatchSettings
from waystation.kinds.mobile.activities.simulator.driver import bundled_packages
from waystation.kinds.mobile.settings import MobileSettings
from waystation.persistence.migrate import migration_files
from waystation.registry import Registered, Registry, load_registry
from waystation.settings import Settings
from waystation.testing import settings_env


def test_kind_migrations_join_the_core_s_in_one_order(tmp_path: Path) -> None:
    core = migration_files()
    after = core[-1][0] + 1  # the next number of the one global sequence
    (tmp_path / f"{after:03d}_my_kind_table.sql").write_text("CREATE TABLE my_kind_rows (id int);")
    (tmp_path / "notes.txt").write_text("not a migration")
    both = migration_files([tmp_path])
    assert both[:-1] == core and both[-1] == (after, "my_kind_table",
                                               "CREATE TABLE my_kind_rows (id int);")
    assert [v for v, _, _ in both] == sorted(v for v, _, _ in both)


def test_a_migration_number_is_taken_once_across_folders(tmp_path: Path) -> None:
    taken = migration_files()[0][0]
    (tmp_path / f"{taken:03d}_again.sql").write_text("SELECT 1;")
    with pytest.raises(ValueError, match=f"migration number {taken:03d} is taken twice"):
        migration_files([tmp_path])


def test_builtin_kinds_bring_their_parts_through_the_hooks() -> None:
    registry = load_registry(use_entry_points=False)
    paths = {route.path for router in registry.routers() for route in router.routes}
    assert {"/jobs/{job_id}", "/items/{item_id}"} <= paths
    sections = registry.console_modules()
    assert set(sections) >= {"batch", "mobile_agent"}
    assert all("export function mount(" in module.read_text() for module in sections.values())
    batch = registry.kind("batch")
    assert batch.api.start_check and batch.api.view and batch.worker.deps and batch.data.metrics
    retention = batch.data.retention
    assert retention and retention.archive and retention.purge
    assert registry.kind("mobile_agent").api.start_check is not None
    # The worker's sweep and the API's /metrics get every kind's share from the registry.
    assert {batch.data.retention, registry.kind("mobile_agent").data.retention} \
        == set(registry.retention())
    assert batch.data.metrics in registry.metrics()


def _kind_with(**hooks: object) -> RunKind:
    validation = load_registry(use_entry_points=False).kind("validation")
    return dataclasses.replace(validation, name="my_kind", workflow_id_prefix="my-", **hooks)


def test_a_kind_s_cli_command_is_a_waystation_subcommand(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    """`waystation simulator list` comes from the mobile kind's `CliHooks.commands`; a plug-in's
    command is parsed and run the same way, and one taking a name already taken is refused."""
    assert cli.main(["simulator", "list"]) == 0
    assert capsys.readouterr().out.split() == bundled_packages()

    seen: list[str] = []

    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--shelf", required=True)

    command = CliCommand(name="restock", help="restock a shelf", configure=configure,
                         run=lambda settings, args: seen.append(args.shelf) or 7)
    kinds = {"my_kind": Registered(_kind_with(cli=CliHooks(commands=[command])), "test")}
    args = cli.build_parser(kinds).parse_args(["restock", "--shelf", "b2"])
    assert args.kind_command.run(None, args) == 7 and seen == ["b2"]

    clash = CliCommand(name="token", help="", run=lambda settings, args: 0)
    with pytest.raises(PluginError, match="kind 'my_kind''s command 'token' is taken"):
        cli.build_parser({"my_kind": Registered(_kind_with(cli=CliHooks(commands=[clash])),
                                                "test")})


def test_demos_are_the_kinds_that_have_one(capsys: pytest.CaptureFixture[str]) -> None:
    """`waystation demo --kind K` takes a kind with a `demo` hook; the first is the default."""
    parser = cli.build_parser(load_registry(use_entry_points=False).kinds)
    assert parser.parse_args(["demo"]).kind == "validation"
    assert parser.parse_args(["demo", "--kind", "agent"]).kind == "agent"
    with pytest.raises(SystemExit):
        parser.parse_args(["demo", "--kind", "batch"])  # no demo of its own
    assert "invalid choice: 'batch' (choose from 'validation', 'agent')" in capsys.readouterr().err


def test_a_kind_s_settings_come_from_code_or_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAYSTATION_ITEMS_DIRS", "/srv/items")
    assert Settings().of(BatchSettings).items_dirs == "/srv/items"
    given = Settings(kind_settings=(BatchSettings(items_dirs="/tmp/mine"),))
    assert given.of(BatchSettings).items_dirs == "/tmp/mine"
    # A child process started by local_stack(processes=True) gets them as variables.
    assert settings_env(given)["WAYSTATION_ITEMS_DIRS"] == "/tmp/mine"
    assert given.of(MobileSettings).adb_device_serials == frozenset()


def test_a_bad_kind_setting_stops_the_api_and_worker_naming_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    class ShelfSettings(BaseSettings):
        shelves: int = Field(1, validation_alias="WAYSTATION_SHELVES")

    registry = Registry()
    registry.add_kind(_kind_with(settings=ShelfSettings), "test")
    monkeypatch.setenv("WAYSTATION_SHELVES", "many")
    with pytest.raises(PluginError, match="(?s)kind 'my_kind''s settings: .*WAYSTATION_SHELVES"):
        registry.check_settings(Settings())
    with pytest.raises(PluginError, match="is not a pydantic-settings BaseSettings"):
        Registry().add_kind(_kind_with(settings=dict), "test")
def test_the_agent_kind_brings_its_conversation_and_agents_through_the_hooks() -> None:
    registry = load_registry(use_entry_points=False)
    paths = {route.path for router in registry.routers() for route in router.routes}
    assert "/runs/{run_id}/messages" in paths
    assert "agent" in registry.console_modules()
    # Only a kind with the `messages` hook takes follow-up messages.
    assert [name for name in registry.names if registry.messages(name)] == ["agent"]
    assert registry.messages("no_such_kind") is None
    assert "planner" in {agent.name for agent in registry.agents}
    assert registry.kind("agent").worker.configure is not None


async def test_the_offline_backend_answers_the_tasks_the_worker_gives_it() -> None:
    from waystation.activities.agents import AgentRequest, backend_named
    from waystation.activities.agents.offline import use_offline_answers
    from waystation.kinds.validation.activities.outputs import FounderInterview

    registry = load_registry(use_entry_points=False)
    answers = registry.offline_answers()
    assert "interview_founder" in answers
    request = AgentRequest(crew="onboarding", task="interview_founder", agent="a",
                           instructions="ask the founder", context={"entrepreneur_input": "x"},
                           output_schema=FounderInterview.model_json_schema())
    backend = backend_named("offline")
    use_offline_answers({})
    generic = (await backend.run(request)).output
    use_offline_answers(answers)
    typed = (await backend.run(request)).output
    # Only the kind's answer reads the context (an idea too short for a keyword: "product").
    assert generic is not None and generic["themes"] == ["themes ask founder"]
    assert typed is not None and typed["themes"] == ["product pain"]
    FounderInterview.model_validate(typed)


async def test_a_step_that_shares_a_tasks_name_gets_its_own_schema_answered() -> None:
    """A batch step named like a crew task, with a schema and a context of its own: the crew
    task's typed answer (which reads the crew's context) is not given to it."""
    from waystation.activities.agents import AgentRequest, backend_named
    from waystation.activities.agents.offline import use_offline_answers

    use_offline_answers(load_registry(use_entry_points=False).offline_answers())
    schema = {"type": "object", "properties": {"colour": {"type": "string"}},
              "required": ["colour"]}
    for task in ("design_value_map", "draft_founders_brief"):
        request = AgentRequest(crew="batch", task=task, agent="a", instructions="name a colour",
                               output_schema=schema)
        output = (await backend_named("offline").run(request)).output
        assert output is not None and set(output) == {"colour"}
        free = (await backend_named("offline").run(
            request.model_copy(update={"output_schema": None}))).output
        assert free is not None and set(free) == {"summary", "notes"}


def test_an_offline_answer_names_the_model_it_returns() -> None:
    from waystation.activities.agents.offline import use_offline_answers

    with pytest.raises(TypeError, match="'guess'.*annotated"):
        use_offline_answers({"guess": lambda context, feedback, rng: None})

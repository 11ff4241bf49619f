"""The public `RunKind` hooks the core calls for every registered kind: migrations in one
global order, routers, console sections, start checks, worker dependencies."""

from __future__ import annotations

from pathlib import Path

import pytest

from persistence.migrate import migration_files
from waystation.registry import load_registry


def test_kind_migrations_join_the_core_s_in_one_order(tmp_path: Path) -> None:
    core = migration_files()
    (tmp_path / "069_my_kind_table.sql").write_text("CREATE TABLE my_kind_rows (id int);")
    (tmp_path / "notes.txt").write_text("not a migration")
    both = migration_files([tmp_path])
    assert both[:-1] == core and both[-1] == (69, "my_kind_table",
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
    assert batch.start_check and batch.view and batch.worker_deps and batch.metrics
    assert batch.retention and batch.retention.archive and batch.retention.purge
    assert registry.kind("mobile_agent").start_check is not None


def test_the_agent_kind_brings_its_conversation_and_agents_through_the_hooks() -> None:
    registry = load_registry(use_entry_points=False)
    paths = {route.path for router in registry.routers() for route in router.routes}
    assert "/runs/{run_id}/messages" in paths
    assert "agent" in registry.console_modules()
    # Only a kind with the `messages` hook takes follow-up messages.
    assert [name for name in registry.names if registry.messages(name)] == ["agent"]
    assert registry.messages("no_such_kind") is None
    assert "planner" in {agent.name for agent in registry.agents}
    assert registry.kind("agent").configure_worker is not None


async def test_the_offline_backend_answers_the_tasks_the_worker_gives_it() -> None:
    from activities.agents import AgentRequest, backend_named
    from activities.agents.offline import use_offline_answers
    from kinds.validation.activities.outputs import FounderInterview

    registry = load_registry(use_entry_points=False)
    answers = registry.offline_answers()
    assert "interview_founder" in answers
    request = AgentRequest(crew="onboarding", task="interview_founder", agent="a",
                           instructions="ask the founder", context={"entrepreneur_input": "x"})
    backend = backend_named("offline")
    use_offline_answers({})
    generic = (await backend.run(request)).output
    use_offline_answers(answers)
    typed = (await backend.run(request)).output
    assert generic == {"summary": "interview_founder done: ask founder",
                       "notes": ["ask", "founder"]}
    FounderInterview.model_validate(typed)

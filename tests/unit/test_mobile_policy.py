"""The exploration policy and the simulator, without Temporal or Postgres."""

from __future__ import annotations

import pytest

from tests.mobile_helpers import NOTES, SHOP, reachable_screens
from tests.mobile_offline import explore_offline
from waystation.kinds.mobile.activities.identity import identify
from waystation.kinds.mobile.activities.models import ActionView, ExploreStepResult
from waystation.kinds.mobile.activities.simulator.driver import (
    KEYBOARD_PACKAGE,
    LAUNCHER_PACKAGE,
    SimulatorDriver,
    bundled_packages,
    load_app,
)
from waystation.kinds.mobile.activities.uixml import parse_hierarchy
from waystation.kinds.mobile.policy import ExplorationState, GreedyDfs


def test_bundled_apps_are_big_enough():
    assert {NOTES, SHOP} <= set(bundled_packages())
    for package in (NOTES, SHOP):
        assert len(reachable_screens(package)) >= 15
        assert len(load_app(package)["declared_activities"]) >= 4


@pytest.mark.parametrize("package", [NOTES, SHOP])
async def test_greedy_dfs_explores_every_screen_and_stops(package):
    state, results, stop = await explore_offline(package, 1000, seed=3)
    assert stop == "explored"
    assert len(state.screens) == len(reachable_screens(package))
    assert len(results) < 400  # DFS with list saturation, not a random walk


async def test_same_seed_same_walk_other_seed_other_walk():
    a = [r.screen_id for r in (await explore_offline(NOTES, 80, seed=1))[1]]
    b = [r.screen_id for r in (await explore_offline(NOTES, 80, seed=1))[1]]
    c = [r.screen_id for r in (await explore_offline(NOTES, 80, seed=2))[1]]
    assert a == b and a != c


async def test_skipping_sensitive_actions_leaves_their_screens_unseen():
    state, _, stop = await explore_offline(SHOP, 1000, seed=0, blocked_sensitive=True)
    assert stop == "explored"
    assert len(state.screens) < len(reachable_screens(SHOP))


def _result(screen: int, actions: list[ActionView], in_app: bool = True) -> ExploreStepResult:
    return ExploreStepResult(step=1, screen_id=screen if in_app else None, activity=".A",
                             in_app=in_app, actions=actions)


def _action(i: int, kind: str = "tap", group: str | None = None,
            index: int | None = None) -> ActionView:
    return ActionView(id=i, selector=f"s{i}", kind=kind, label=f"a{i}", x=1, y=1,
                      row_group=group, row_index=index)


def test_rows_saturate_self_loops_are_ineffective_and_back_comes_last():
    policy, state = GreedyDfs(random_share=0), ExplorationState()
    rows = [_action(i, group="list", index=i) for i in range(1, 6)]
    here = _result(10, [*rows, _action(9, "back")])
    policy.observe(state, 1, None, here)
    tried = []
    for step in range(2, 5):
        choice = policy.choose(state, step, here)
        assert choice.action is not None
        tried.append(choice.action.id)
        policy.observe(state, step, choice.command, here)  # every row: a self-loop
    # two distinct rows, then the list is saturated and back is all that is left
    assert len({t for t in tried[:2]}) == 2 and tried[2] == 9
    assert set(state.screens[10].ineffective) >= set(tried[:2])


def test_shortest_path_back_to_the_frontier_and_leaving_app_guard():
    policy, state = GreedyDfs(random_share=0), ExplorationState()
    a, b = _action(1), _action(2)
    policy.observe(state, 1, None, _result(1, [a, b]))
    go = policy.choose(state, 2, _result(1, [a, b]))
    policy.observe(state, 2, go.command, _result(2, [_action(3, "back")]))
    back = policy.choose(state, 3, _result(2, [_action(3, "back")]))
    assert back.action is not None and back.action.kind == "back"
    policy.observe(state, 3, back.command, _result(1, [a, b]))
    # screen 2 is exhausted; screen 1 has one untried action left
    again = policy.choose(state, 4, _result(1, [a, b]))
    assert again.action is not None and again.action.id != go.action.id  # type: ignore[union-attr]
    outside = _result(0, [], in_app=False)
    assert policy.choose(state, 5, outside).command.kind == "back"  # type: ignore[union-attr]
    assert policy.choose(state, 6, outside).command.kind == "launch"  # type: ignore[union-attr]


async def test_simulator_volatile_content_loading_keyboard_and_launcher():
    sim = SimulatorDriver(NOTES)
    await sim.launch(NOTES)
    loading = await sim.observe()
    assert identify(parse_hierarchy(loading.xml)).near_blank and loading.png[:4] == b"\x89PNG"
    first = await sim.observe()
    ident = identify(parse_hierarchy(first.xml))
    settings = next(a for a in ident.actions if a.label == "Settings")
    await sim.tap(settings.x, settings.y)
    assert (await sim.observe()).activity == ".SettingsActivity"
    await sim.back()
    await sim.observe()  # the splash again
    back_home = await sim.observe()
    assert back_home.xml != first.xml  # the clock ticked, the list changed
    assert identify(parse_hierarchy(back_home.xml)).layout_hash == ident.layout_hash
    search = next(a for a in ident.actions if a.label == "Search")
    await sim.tap(search.x, search.y)
    field = next(a for a in identify(parse_hierarchy((await sim.observe()).xml)).actions
                 if a.kind == "input")
    await sim.input_text(field.x, field.y, "milk")
    typing = await sim.observe()
    assert KEYBOARD_PACKAGE in typing.xml and typing.package == NOTES
    await sim.back()  # closes the keyboard only
    assert (await sim.observe()).activity == ".MainActivity"
    await sim.back()
    await sim.back()
    assert (await sim.observe()).package == LAUNCHER_PACKAGE

"""Exploration policies: which action to try next. Deterministic, so they run in the workflow.

`GreedyDfs` is DroidBot's greedy depth-first exploration, made a little smarter:
- on the current screen, the least-tried action first (back last), ties broken by a random
  generator seeded with (run seed, step) so a replay makes the same choice, and a small share
  of random picks so a run does not get stuck in one order;
- list rows are saturated: once two distinct rows of one list were tried, the other rows are
  taken to lead to the same kind of screen and are not tried;
- an action that left the screen unchanged is a self-loop, marked ineffective, and never used
  to navigate;
- with nothing left to try here, the shortest known path (breadth-first, over effective
  edges) to the nearest screen that still has untried actions;
- outside the app: back once, then relaunch it (the leaving-app guard);
- when the graph stops growing for `stall_steps`, a restart from the launch screen; if no
  screen with untried actions can be reached even after a restart, the app is explored.

A policy is any class with `observe` and `choose`; an LLM policy would call an activity from
the workflow and keep the same state model.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from waystation.kinds.mobile.activities.models import (
        ActionCommand,
        ActionView,
        ExploreStepResult,
    )
    from waystation.kinds.mobile.repository import ActionRecord, StepRecord

ROW_SATURATION = 2
RANDOM_SHARE = 0.05
StopReason = Literal["max_steps", "explored", "goal_reached", "canceled", "error_budget"]


class ScreenNode(BaseModel):
    activity: str
    actions: dict[int, ActionView] = Field(default_factory=dict)
    tried: dict[int, int] = Field(default_factory=dict)
    ineffective: list[int] = Field(default_factory=list)
    rows_tried: dict[str, list[int]] = Field(default_factory=dict)


class ExplorationState(BaseModel):
    seed: int = 0
    screens: dict[int, ScreenNode] = Field(default_factory=dict)
    # "from:action" -> to
    edges: dict[str, int] = Field(default_factory=dict)
    blocked: list[int] = Field(default_factory=list)
    outside_steps: int = 0
    last_growth_step: int = 0
    relaunches_without_path: int = 0
    stall_restarts: int = 0


@dataclass
class Choice:
    command: ActionCommand | None
    action: ActionView | None = None
    stop: StopReason | None = None
    why: str = ""


class ExplorationPolicy(Protocol):
    def observe(self, state: ExplorationState, step: int, taken: ActionCommand | None,
                result: ExploreStepResult) -> None: ...

    def choose(self, state: ExplorationState, step: int, current: ExploreStepResult
               ) -> Choice: ...


def command_for(action: ActionView, from_screen: int) -> ActionCommand:
    return ActionCommand(kind=action.kind, action_id=action.id,
                         from_screen_id=from_screen, x=action.x, y=action.y, y2=action.y2,
                         label=action.label)


LAUNCH = ActionCommand(kind="launch", label="launch")
BACK = ActionCommand(kind="back", label="back (outside the app)")


class GreedyDfs:
    def __init__(self, *, stall_steps: int = 150, random_share: float = RANDOM_SHARE,
                 max_stall_restarts: int = 3) -> None:
        self.stall_steps = stall_steps
        self.random_share = random_share
        self.max_stall_restarts = max_stall_restarts

    def observe(self, state: ExplorationState, step: int, taken: ActionCommand | None,
                result: ExploreStepResult) -> None:
        if result.screen_id is not None:
            node = state.screens.get(result.screen_id)
            if node is None:
                node = state.screens[result.screen_id] = ScreenNode(
                    activity=result.activity or "")
            # Coordinates are refreshed on every visit; ids stay.
            node.actions.update({a.id: a for a in result.actions})
        if result.new_screen:
            state.last_growth_step = step
            state.stall_restarts = 0
        if taken is None or taken.action_id is None or taken.from_screen_id is None:
            return
        origin = state.screens.get(taken.from_screen_id)
        if origin is None:
            return
        origin.tried[taken.action_id] = origin.tried.get(taken.action_id, 0) + 1
        action = origin.actions.get(taken.action_id)
        if action is not None and action.row_group is not None:
            rows = origin.rows_tried.setdefault(action.row_group, [])
            if action.row_index not in rows and action.row_index is not None:
                rows.append(action.row_index)
        if result.in_app and result.screen_id is not None:
            state.edges[f"{taken.from_screen_id}:{taken.action_id}"] = result.screen_id
            if result.screen_id == taken.from_screen_id and \
                    taken.action_id not in origin.ineffective:
                origin.ineffective.append(taken.action_id)

    def choose(self, state: ExplorationState, step: int, current: ExploreStepResult
               ) -> Choice:
        rng = random.Random(f"{state.seed}:{step}")
        if not current.in_app or current.screen_id is None:
            state.outside_steps += 1
            if state.outside_steps >= 2:
                state.outside_steps = 0
                return Choice(LAUNCH, why="left the app; relaunch")
            return Choice(BACK, why="left the app; back")
        state.outside_steps = 0
        if step - state.last_growth_step >= self.stall_steps:
            state.last_growth_step = step
            state.stall_restarts += 1
            if state.stall_restarts > self.max_stall_restarts:
                return Choice(None, stop="explored", why="the graph stopped growing")
            return Choice(LAUNCH, why="no new screen lately; restart")
        sid = current.screen_id
        untried = self._untried(state, sid)
        if untried:
            state.relaunches_without_path = 0
            node = state.screens[sid]
            if rng.random() < self.random_share:
                pool = [a for a in node.actions.values() if a.id not in state.blocked]
                pick = rng.choice(sorted(pool, key=lambda a: a.id))
                return Choice(command_for(pick, sid), pick, why="random share")
            key = min((a.kind == "back", node.tried.get(a.id, 0)) for a in untried)
            best = sorted((a for a in untried
                           if (a.kind == "back", node.tried.get(a.id, 0)) == key),
                          key=lambda a: a.id)
            pick = rng.choice(best)
            return Choice(command_for(pick, sid), pick, why="least tried")
        path = self._path_to_frontier(state, sid)
        if path:
            state.relaunches_without_path = 0
            action = state.screens[sid].actions[path[0]]
            return Choice(command_for(action, sid), action,
                          why=f"to frontier, {len(path)} away")
        if state.relaunches_without_path < 1 and self._frontier(state):
            state.relaunches_without_path += 1
            return Choice(LAUNCH, why="frontier unreachable from here; restart")
        return Choice(None, stop="explored", why="nothing left to explore")

    def _untried(self, state: ExplorationState, sid: int) -> list[ActionView]:
        node = state.screens[sid]
        out = []
        for action in node.actions.values():
            if node.tried.get(action.id, 0) or action.id in state.blocked:
                continue
            if action.row_group is not None:
                rows = node.rows_tried.get(action.row_group, [])
                if len(rows) >= ROW_SATURATION and action.row_index not in rows:
                    continue
            out.append(action)
        return out

    def _frontier(self, state: ExplorationState) -> set[int]:
        return {sid for sid in state.screens if self._untried(state, sid)}

    def _path_to_frontier(self, state: ExplorationState, start: int) -> list[int]:
        frontier = self._frontier(state)
        return shortest_path(state, start, frontier) if frontier else []


def shortest_path(state: ExplorationState, start: int, targets: set[int]) -> list[int]:
    """The actions of a shortest known path (breadth-first, over effective edges) from `start`
    to the nearest of `targets`; empty when none can be reached (or `start` is one)."""
    graph: dict[int, list[tuple[int, int]]] = {}
    for key, to in state.edges.items():
        src, action = (int(v) for v in key.split(":"))
        if src != to and action not in state.blocked:
            graph.setdefault(src, []).append((action, to))
    seen, queue = {start}, deque[tuple[int, list[int]]]([(start, [])])
    while queue:
        here, path = queue.popleft()
        for action, to in sorted(graph.get(here, [])):
            if to in seen:
                continue
            if to in targets:
                return path + [action]
            seen.add(to)
            queue.append((to, path + [action]))
    return []


def route(state: ExplorationState, start: int, target: int) -> list[str]:
    """The edges ("from:action") of a shortest known path from `start` to `target`."""
    here, hops = start, []
    for action in shortest_path(state, start, {target}):
        hops.append(f"{here}:{action}")
        here = state.edges[hops[-1]]
    return hops


def restored_state(seed: int, steps: list[StepRecord],
                   actions: list[ActionRecord]) -> ExplorationState:
    """The policy's state as a run's recorded steps leave it (where a fork starts): its screens
    with their stored actions, what was tried, the edges and self-loops. Coordinates are not
    stored: a screen's are refreshed when it is observed again, before any action on it. What
    a run decided without recording it (actions a human refused) starts afresh."""
    state = ExplorationState(seed=seed, last_growth_step=steps[-1].step if steps else 0)
    for step in steps:
        if step.screen_id is not None and step.screen_id not in state.screens:
            state.screens[step.screen_id] = ScreenNode(activity=step.activity or "")
    for a in actions:
        if (node := state.screens.get(a.screen_id)) is not None:
            node.actions[a.id] = ActionView(id=a.id, selector=a.selector, kind=a.kind,
                                            label=a.label, x=0, y=0, row_group=a.row_group,
                                            row_index=a.row_index, sensitive=a.sensitive)
    for step in steps:
        origin = state.screens.get(step.from_screen_id) if step.from_screen_id else None
        if origin is None or step.action_id is None:
            continue
        # Counted as GreedyDfs.observe counts them.
        origin.tried[step.action_id] = origin.tried.get(step.action_id, 0) + 1
        action = origin.actions.get(step.action_id)
        if action is not None and action.row_group is not None and action.row_index is not None:
            rows = origin.rows_tried.setdefault(action.row_group, [])
            if action.row_index not in rows:
                rows.append(action.row_index)
        if step.screen_id is not None:
            state.edges[f"{step.from_screen_id}:{step.action_id}"] = step.screen_id
            if step.screen_id == step.from_screen_id and \
                    step.action_id not in origin.ineffective:
                origin.ineffective.append(step.action_id)
    return state


class RandomPolicy(GreedyDfs):
    """A monkey: any action of the screen at random, until max steps (a baseline, and the
    long-run load of the tests and the benchmark). Keeps the leaving-app guard."""

    def choose(self, state: ExplorationState, step: int, current: ExploreStepResult
               ) -> Choice:
        if not current.in_app or current.screen_id is None:
            return super().choose(state, step, current)
        node = state.screens[current.screen_id]
        pool = sorted((a for a in node.actions.values() if a.id not in state.blocked),
                      key=lambda a: a.id)
        if not pool:
            return Choice(LAUNCH, why="nothing to do here; restart")
        pick = random.Random(f"{state.seed}:{step}").choice(pool)
        return Choice(command_for(pick, current.screen_id), pick, why="random")


POLICIES = {"greedy_dfs": GreedyDfs, "random": RandomPolicy}

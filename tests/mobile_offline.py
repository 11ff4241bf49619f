"""The exploration loop without Temporal or Postgres: policy + simulator + identity."""

from __future__ import annotations

import uuid

from waystation.kinds.mobile.activities.models import ExploreStepInput, ExploreStepResult
from waystation.kinds.mobile.activities.steps import MobileActivities
from waystation.kinds.mobile.policy import LAUNCH, ExplorationState, GreedyDfs


async def explore_offline(package: str, steps: int, seed: int = 0, *,
                          blocked_sensitive: bool = False
                          ) -> tuple[ExplorationState, list[ExploreStepResult], str | None]:
    acts = MobileActivities(None, None)
    policy, state = GreedyDfs(stall_steps=150), ExplorationState(seed=seed)
    run_id, command, results = uuid.uuid4(), LAUNCH, []
    for step in range(1, steps + 1):
        result = await acts.explore_step(ExploreStepInput(
            run_id=run_id, session_id=str(run_id), step=step, app_package=package,
            command=command, persist=False))
        results.append(result)
        policy.observe(state, step, command, result)
        choice = policy.choose(state, step, result)
        while choice.action is not None and choice.action.sensitive and blocked_sensitive:
            state.blocked.append(choice.action.id)
            choice = policy.choose(state, step, result)
        if choice.stop:
            return state, results, choice.stop
        assert choice.command is not None
        command = choice.command
    return state, results, None

"""Helpers for the mobile-agent tests: runs, ground truth of the bundled apps."""

from __future__ import annotations

import uuid
from collections import deque
from typing import Any

import asyncpg

from waystation.kinds.mobile.activities.identity import identify
from waystation.kinds.mobile.activities.simulator.driver import SimulatorDriver, load_app
from waystation.kinds.mobile.activities.uixml import parse_hierarchy
from waystation.kinds.mobile.kind import MOBILE
from waystation.kinds.mobile.models import MobileAgentRunInput, MobileInput
from waystation.persistence.runs import create_run

NOTES = "com.waystation.sample.notes"
SHOP = "com.waystation.sample.shop"


async def new_mobile_run(pool: asyncpg.Pool, owner: str = "alice",
                         **fields: Any) -> MobileAgentRunInput:
    run_id = uuid.uuid4()
    fields.setdefault("app_package", NOTES)
    run_input = MobileInput(**fields)
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind="mobile_agent", owner=owner, group_id=None,
                         workflow_id=MOBILE.workflow_id(run_id), idempotency_key=None,
                         input=run_input.model_dump(mode="json"))
    return MobileAgentRunInput(run_id=run_id, owner=owner, input=run_input)


def reachable_screens(package: str) -> set[str]:
    """Ground truth: the screens reachable from the launch screen by transitions."""
    app = load_app(package)
    seen, queue = {app["launch"]}, deque([app["launch"]])
    while queue:
        for target in app["screens"][queue.popleft()]["transitions"].values():
            if target != "back" and target not in seen:
                seen.add(target)
                queue.append(target)
    return seen


async def ground_truth_keys(package: str) -> dict[str, tuple[str, str]]:
    """(activity, layout hash) of every screen of the app, as the explorer would key it."""
    keys = {}
    for name, screen in load_app(package)["screens"].items():
        sim = SimulatorDriver(package, render=False)
        sim.stack, sim.visits = [name], {name: 3}
        sim.loading_shown = {sim.ticks * 1000 + 1}
        xml = (await sim.observe()).xml
        keys[name] = (screen["activity"], identify(parse_hierarchy(xml)).layout_hash)
    return keys

"""The mobile kind's recorded histories (tests/histories, written by `record_histories.py`)
replay against its workflow as installed now: a run may wait at a gate for a day, so a change
to `MobileAgentRun`'s commands needs `workflow.patched`, not a re-recording. The core's replay
test replays the core's histories; a kind's own replay here, as a plug-in's do."""

from __future__ import annotations

from pathlib import Path

from waystation_mobile.workflow import MobileAgentRun

from waystation.sdk import replay_histories

HISTORIES = Path(__file__).resolve().parents[1] / "histories"


async def test_mobile_histories_replay() -> None:
    replayed = await replay_histories(HISTORIES, [MobileAgentRun])
    assert {"mobile_explore_continue_as_new", "mobile_sensitive_gates",
            "mobile_sensitive_gates_answered_first", "mobile_fork_from_step"} <= set(replayed)

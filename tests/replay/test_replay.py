"""Replays every recorded workflow history against the current workflow code.

A run can wait at a gate for a week, so histories written by older code are replayed by newer
code as a matter of course. Every file in tests/histories (recorded by
`python -m tests.tools.record_histories` and its batch, mobile and notification siblings) must
replay without nondeterminism; a failure here means the change needs `workflow.patched` or a
new workflow name, not a re-recording. Plug-ins use the same kit:
`waystation.replay.replay_histories`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from waystation.registry import load_registry
from waystation.replay import replay_history
from waystation.worker import NOTIFICATION_WORKFLOWS

FOLDER = Path(__file__).resolve().parents[1] / "histories"
HISTORIES = sorted(FOLDER.glob("*.json"))


def test_histories_are_recorded() -> None:
    assert {"validation_approve_all", "validation_reject_segment_override",
            "validation_expire_pause_reopen", "mobile_explore_continue_as_new",
            "mobile_sensitive_gates", "agent_message_with_thinking"} <= {
                p.stem for p in HISTORIES}


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_history_replays_deterministically(path: Path) -> None:
    # With the installed plug-ins: an agent run finds its agent by name (agent_langgraph_*'s
    # graph is examples/langgraph_agent's), and the mobile_* runs' workflow is the mobile
    # kind's distribution's (kinds/mobile), whose released histories stay here with the rest.
    workflows = [*load_registry().workflows(), *NOTIFICATION_WORKFLOWS]
    result = await replay_history(path, workflows)
    assert result.replay_failure is None

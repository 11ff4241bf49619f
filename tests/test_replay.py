"""Replays every recorded workflow history against the current workflow code.

A run can wait at a gate for a week, so histories written by older code are replayed by newer
code as a matter of course. Every file in tests/histories (recorded by
`python -m tests.record_histories`) must replay without nondeterminism; a failure here means
the change needs `workflow.patched` or a new workflow name, not a re-recording.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from waystation.worker import WORKFLOWS

HISTORIES = {p.stem: p.read_text() for p in
             sorted((Path(__file__).resolve().parent / "histories").glob("*.json"))}


def test_histories_are_recorded() -> None:
    assert {"validation_approve_all", "validation_reject_segment_override",
            "validation_expire_pause_reopen"} <= set(HISTORIES)


@pytest.mark.parametrize("name", sorted(HISTORIES))
async def test_history_replays_deterministically(name: str) -> None:
    # The workflow never reads its own id, so the file name stands in for it.
    history = WorkflowHistory.from_json(name, HISTORIES[name])
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    # Raises on nondeterminism (and on any workflow task failure during the replay).
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None

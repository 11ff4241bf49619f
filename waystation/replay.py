"""Replaying recorded histories: the kit Waystation's own replay tests and plug-ins' tests use.

`replay_histories` replays recorded workflow histories (JSON as the Temporal CLI and Web UI
export them, or as `WorkflowHandle.fetch_history().to_json()` writes them) against the
workflow code installed now. A run may wait at a gate for weeks, so histories of released code
are replayed by newer code as a matter of course: a failure means the change needs
`workflow.patched` (or a new workflow type), not a re-recording.

    from waystation.replay import replay_histories

    async def test_released_histories_replay() -> None:
        await replay_histories(Path(__file__).parent / "histories", [MyWorkflow])
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer, WorkflowReplayResult

from waystation.temporal_client import DATA_CONVERTER


async def replay_history(path: Path, workflows: Sequence[type]) -> WorkflowReplayResult:
    """Replay one history file; raises on nondeterminism or any workflow task failure."""
    # A workflow that never reads its own id replays under any id: the file name stands in.
    history = WorkflowHistory.from_json(path.stem, path.read_text())  # noqa: ASYNC240
    replayer = Replayer(workflows=workflows, data_converter=DATA_CONVERTER)
    return await replayer.replay_workflow(history, raise_on_replay_failure=True)


async def replay_histories(directory: Path, workflows: Sequence[type]) -> list[str]:
    """Replay every `*.json` history in `directory`; returns the names replayed."""
    names = []
    for path in sorted(directory.glob("*.json")):  # noqa: ASYNC240 (a test's few files)
        await replay_history(path, workflows)
        names.append(path.stem)
    if not names:
        raise AssertionError(f"no histories in {directory}")
    return names

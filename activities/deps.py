"""What the worker hands each run kind's activity factory (`WorkerHooks.activities`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from waystation.activities.agents.base import AgentBackend
from waystation.activities.read_model import ReadModelActivities


@dataclass(frozen=True)
class WorkerDeps:
    pool: asyncpg.Pool
    backend: AgentBackend
    # Where the worker stores artifacts (screenshots, files); None keeps none.
    artifact_dir: Path | None = None
    # Each kind's own dependencies, by kind name (`WorkerHooks.deps`, built from the
    # worker's settings).
    kinds: Mapping[str, Any] = field(default_factory=dict)
    # The recorder: an activity applying a run's staged write with its own (a decision
    # written with the next step) applies it through `read_model.apply`, notifications and all.
    read_model: ReadModelActivities | None = None

    def of(self, kind: str) -> Any:
        """The kind's own dependencies (None when it has no `WorkerHooks.deps`)."""
        return self.kinds.get(kind)

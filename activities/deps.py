"""What the worker hands each run kind's activity factory (`RunKind.activities`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import asyncpg

from activities.agents.base import AgentBackend
from activities.batch.items_source import ItemsSources


@dataclass(frozen=True)
class WorkerDeps:
    pool: asyncpg.Pool
    backend: AgentBackend
    # Where the mobile explorer stores screenshots; None keeps none.
    artifact_dir: Path | None = None
    # Where a batch job's items_path may point; None allows nowhere.
    items_sources: ItemsSources | None = None

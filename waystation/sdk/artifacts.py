"""Where a kind's activities store files (screenshots, reports): the store's interface and the
local store the API serves them from.
"""

from __future__ import annotations

from temporalio import workflow

# Passed through Temporal's sandbox, as the package's root is (waystation/sdk/__init__.py).
with workflow.unsafe.imports_passed_through():
    from waystation.activities.artifacts import ArtifactStore, LocalArtifactStore

__all__ = ["ArtifactStore", "LocalArtifactStore"]

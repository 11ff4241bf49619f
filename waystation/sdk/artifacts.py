"""Where a kind's activities store files (screenshots, reports): the store's interface and the
local store the API serves them from.
"""

from __future__ import annotations

from activities.artifacts import ArtifactStore, LocalArtifactStore

__all__ = ["ArtifactStore", "LocalArtifactStore"]

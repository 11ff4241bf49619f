"""Content-addressed artifact store: screenshots and hierarchies, by SHA-256.

Files live at `<root>/<sha[:2]>/<sha>` and are written once (temporary file, then rename), so
a retried step or two runs seeing the same screen store the bytes once. Another store (an
object store bucket) needs only `put`, `path` and `delete`.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Protocol


class ArtifactStore(Protocol):
    def put(self, data: bytes) -> str: ...

    def path(self, sha256: str) -> Path | None: ...

    def delete(self, sha256: str) -> None: ...


class LocalArtifactStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _file(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    def put(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        target = self._file(sha)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, target)
        return sha

    def path(self, sha256: str) -> Path | None:
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            return None
        target = self._file(sha256)
        return target if target.is_file() else None

    def delete(self, sha256: str) -> None:
        """Remove one artifact (retention, erasure); a missing one is already gone."""
        target = self.path(sha256)
        if target is not None:
            target.unlink(missing_ok=True)

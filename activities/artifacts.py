"""Content-addressed artifact store: screenshots and hierarchies, by SHA-256.

Files live at `<root>/<sha[:2]>/<sha>` and are written once (temporary file, then rename), so
a retried step or two runs seeing the same screen store the bytes once. Another store (an
object store bucket) needs only `put`, `path` and `delete`.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import Protocol

_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL


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
        # A mobile step stores two artifacts before its row commits, so this path is kept to
        # plain os calls: one stat, then (new bytes) open, write, rename; the folder is made
        # only when the open finds it missing.
        sha = hashlib.sha256(data).hexdigest()
        folder = os.path.join(self.root, sha[:2])
        target = os.path.join(folder, sha)
        if os.path.exists(target):
            return sha
        tmp = os.path.join(folder, f".tmp-{uuid.uuid4().hex}")
        try:
            fd = os.open(tmp, _NEW_FILE, 0o600)
        except FileNotFoundError:
            os.makedirs(folder, exist_ok=True)
            fd = os.open(tmp, _NEW_FILE, 0o600)
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

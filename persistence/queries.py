"""Named SQL queries, loaded from `queries/*.sql` by name.

Each query in those files starts with `-- name: <name>` followed by a one-line comment; keeping
SQL in .sql files lets it be read, diffed and linted as SQL.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


@cache
def _all_queries() -> dict[str, str]:
    queries: dict[str, str] = {}
    folder = resources.files("persistence") / "queries"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        parts = _NAME.split(entry.read_text())
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in queries:
                raise ValueError(f"query {name!r} defined twice")
            queries[name] = body.strip()
    return queries


def sql(name: str) -> str:
    return _all_queries()[name]

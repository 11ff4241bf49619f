"""docs/security.md's "Ways in" is kept: every path the app serves is named by a row, every
path a row names is still served, and every test a row cites exists."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from waystation.api.app import create_app
from waystation.registry import load_registry
from waystation.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SECURITY = ROOT / "docs" / "security.md"


def served_paths(routes: Iterable[Any], prefix: str = "") -> Iterator[str]:
    """Every path template of the app: routes, mounts, and the routes of included routers
    (FastAPI keeps an included router as one wrapper, `_IncludedRouter`, without a path)."""
    for route in routes:
        original = getattr(route, "original_router", None)
        if original is not None:
            yield from served_paths(original.routes, prefix + route.include_context.prefix)
        else:
            yield prefix + route.path


def first_segment(path: str) -> str:
    return "/" + path.lstrip("/").split("/", 1)[0]


@pytest.fixture(scope="module")
def app() -> FastAPI:
    # The built-in kinds only: the table is Waystation's own; creating the app connects to
    # nothing (its lifespan does).
    return create_app(Settings(database_url="postgresql://nobody@localhost/none"),
                      registry=load_registry(use_entry_points=False))


@pytest.fixture(scope="module")
def rows() -> list[list[str]]:
    text = SECURITY.read_text()
    table = text.split("## Ways in", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in table.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| Way in | Paths | Guarded by | Proved by |"), lines[0]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[1:]]


def named_paths(rows: list[list[str]]) -> set[str]:
    return {path for row in rows for path in re.findall(r"`(/[^`]*)`", row[1])}


def test_every_way_in_the_app_serves_has_a_row(app: FastAPI, rows: list[list[str]]) -> None:
    named = {first_segment(path) for path in named_paths(rows)}
    served = {first_segment(path) for path in served_paths(app.routes)}
    missing = served - named
    assert not missing, (f"docs/security.md's Ways in has no row for {sorted(missing)}: add "
                         "what guards each and the test that proves it")


def test_every_path_a_row_names_is_served(app: FastAPI, rows: list[list[str]]) -> None:
    served = set(served_paths(app.routes))
    gone = {path for path in named_paths(rows)
            if path not in served and not any(s.startswith(path.rstrip("/") + "/")
                                               for s in served)}
    assert not gone, f"docs/security.md names paths the app does not serve: {sorted(gone)}"


def test_every_row_is_proved_by_tests_that_exist(rows: list[list[str]]) -> None:
    for way_in, _, guard, proof in rows:
        assert guard, way_in
        cited = re.findall(r"`(tests/[^`]+\.py)`", proof)
        if way_in.endswith("(coming)"):
            continue
        assert cited, f"{way_in}: no test proves it"
        for test in cited:
            assert (ROOT / test).is_file(), f"{way_in}: {test} does not exist"

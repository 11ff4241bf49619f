"""The core names no kind: no module of `api`, `activities`, `persistence`, `waystation`,
`workflows` or `contracts`, no SQL of the core (its queries and migrations) and no console
script imports a kind's package or names its kind, tables, columns or routes. A kind reaches
the core only through its `RunKind` hooks, so adding a built-in kind, or moving one out into a
plug-in, touches no core module (issue 30), and the core's tables carry no kind's column
(issue 40)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ("api", "activities", "persistence", "waystation", "workflows", "contracts")
CONSOLE = ROOT / "api" / "console" / "static"


@dataclass(frozen=True)
class Kind:
    package: str  # its import path (installed: its folder under kinds/ is `waystation.kinds.*`)
    name: str  # its `RunKind.name`
    tables: frozenset[str]
    routes: frozenset[str]  # first path segments of its own routes
    columns: frozenset[str] = frozenset()  # of its own tables, words of its own


KINDS = (
    Kind(package="waystation.kinds.batch", name="batch",
          tables=frozenset({"jobs", "work_units", "item_outputs"}),
          routes=frozenset({"/jobs", "/items", "/workers"})),
    Kind(package="waystation.kinds.mobile", name="mobile_agent",
          tables=frozenset({"apps", "screens", "actions", "edges",
                            "graph_persistence_outcomes", "mobile_runs"}),
          routes=frozenset({"/apps", "/artifacts"}),
          columns=frozenset({"app_package"})),
    Kind(package="waystation.kinds.validation", name="validation", tables=frozenset(),
          routes=frozenset()),
    # Its routes are `/runs/{id}/messages`: under the core's `/runs`, so none of its own here.
    Kind(package="waystation.kinds.agent", name="agent", tables=frozenset(), routes=frozenset()),
)

# A kind's name the core uses as another word: (core file, what) -> what it means there.
NOT_THE_KIND = {
    ("api/schemas.py", "agent"):
        "a transcript entry's role (`user`, `agent`, `tool`: who spoke), part of the API's "
        "shape",
}

# persistence/schema.sql shows the whole schema, the kinds' tables too (generated from the
# core's migrations and the built-in kinds'). The core's migrations are scanned: since the kinds
# own their tables (issue 40) none creates or names one of a kind's.
WHOLE_SCHEMA = ROOT / "persistence" / "schema.sql"


def core_files() -> list[Path]:
    return [p for top in CORE for p in sorted((ROOT / top).rglob("*"))
            if p.suffix in (".py", ".sql", ".js") and ".venv" not in p.parts
            and p != WHOLE_SCHEMA]


def imported_modules(tree: ast.AST) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
    return modules


def string_constants(tree: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def named(path: Path, kind: Kind) -> set[str]:
    """What of `kind` the file names: its package, its name as a string, a table, a column,
    a route."""
    text = path.read_text()
    found: set[str] = set()
    routes = "|".join(re.escape(r) for r in kind.routes) or "(?!)"  # none: matches nothing
    route = re.compile(rf"""["'`]({routes})(?=[/"'`?{{$]|\b)""")
    if path.suffix == ".py":
        tree = ast.parse(text, str(path))
        found |= {kind.package for m in imported_modules(tree)
                  if m == kind.package or m.startswith(kind.package + ".")}
        strings = string_constants(tree)
        found |= {kind.name for s in strings if s == kind.name}
        sql_like = [s for s in strings if re.search(r"\b(FROM|JOIN|UPDATE|INTO)\b", s)]
        found |= {t for t in kind.tables | kind.columns for s in sql_like
                  if re.search(rf"\b{t}\b", s)}
        found |= {m.group(1) for s in strings for m in [route.match(f'"{s}')] if m}
    elif path.suffix == ".sql":
        code = re.sub(r"--.*", "", text)
        found |= {t for t in kind.tables | kind.columns if re.search(rf"\b{t}\b", code)}
        if re.search(rf"\bkind\s*(=|<>|IN\s*\([^)]*)\s*'{re.escape(kind.name)}'", code):
            found.add(kind.name)  # a run's kind compared with the kind's name
    elif path.suffix == ".js":
        code = re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE)
        folder = kind.package.removeprefix("waystation.").replace(".", "/")
        if re.search(rf"""["'`][^"'`]*({re.escape(folder)}|/{kind.name}\.js)""", code):
            found.add(kind.package)
        if re.search(rf"""["'`]{re.escape(kind.name)}["'`]""", code):
            found.add(kind.name)
        found |= {c for c in kind.columns if re.search(rf"\b{c}\b", code)}
        found |= {m.group(1) for m in route.finditer(code)}
    return found


def test_the_core_names_no_kind() -> None:
    offences = []
    for path in core_files():
        where = path.relative_to(ROOT).as_posix()
        for kind in KINDS:
            for what in sorted(named(path, kind)):
                if (where, what) not in NOT_THE_KIND:
                    offences.append(f"{where} names the {kind.name} kind: {what}")
    assert not offences, ("the core must reach a kind through its RunKind hooks only:\n"
                          + "\n".join(offences))


def test_the_other_words_are_still_there() -> None:
    """An entry of NOT_THE_KIND whose file no longer says it must leave the list."""
    by_file: dict[str, set[str]] = {}
    for path in core_files():
        where = path.relative_to(ROOT).as_posix()
        by_file[where] = set().union(*(named(path, kind) for kind in KINDS))
    stale = [f"{where}: {what}" for where, what in NOT_THE_KIND
             if what not in by_file.get(where, set())]
    assert not stale, "remove from NOT_THE_KIND: " + "; ".join(stale)


def test_every_kind_package_is_scanned() -> None:
    """A new package in `kinds/` is added to KINDS, with its tables and routes."""
    here = {p.name for p in (ROOT / "kinds").iterdir() if (p / "kind.py").exists()}
    assert {k.package.rpartition(".")[2] for k in KINDS} == here


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The scan itself, on files that name the batch kind every way it looks for."""
    batch = KINDS[0]
    samples = {
        "a.py": 'from waystation.kinds.batch.repository import JobRow\n',
        "b.py": 'if run.kind == "batch":\n    pass\n',
        "c.py": 'Q = "SELECT 1 FROM work_units w"\n',
        "d.py": 'URL = "/jobs/{job_id}"\n',
        "e.sql": "SELECT count(*) FROM item_outputs;\n",
        "h.sql": "SELECT e->>'agent' FROM runs WHERE kind = 'batch' -- jobs\n",
        "f.js": 'import { mount } from "./batch.js";\nconst url = `/items/${id}`;\n',
        "g.py": 'jobs: list[str] = []  # a word, not a table\nOTHER = "batches"\n',
    }
    found = {}
    for name, text in samples.items():
        (tmp_path / name).write_text(text)
        found[name] = named(tmp_path / name, batch)
    assert found == {"a.py": {"waystation.kinds.batch"}, "b.py": {"batch"},
                     "c.py": {"work_units"}, "d.py": {"/jobs"}, "e.sql": {"item_outputs"},
                     "h.sql": {"batch"},
                     "f.js": {"waystation.kinds.batch", "/items"}, "g.py": set()}


def test_the_scan_finds_a_kind_s_column(tmp_path: Path) -> None:
    """A kind's column named by the core's SQL or console (issue 40: `runs.app_package`)."""
    mobile = next(k for k in KINDS if k.name == "mobile_agent")
    samples = {"a.sql": "ALTER TABLE runs ADD COLUMN app_package text;\n",
               "b.py": 'Q = "SELECT id FROM runs WHERE app_package = $1"\n',
               "c.js": 'const filters = ["kind", "app_package"];\n',
               "d.sql": "-- app_package: a comment\nSELECT 1;\n"}
    found = {}
    for name, text in samples.items():
        (tmp_path / name).write_text(text)
        found[name] = named(tmp_path / name, mobile)
    assert found == {"a.sql": {"app_package"}, "b.py": {"app_package"},
                     "c.js": {"app_package"}, "d.sql": set()}

"""The distribution installs one top-level package, `waystation` (issue 40): the repository's
folders `api/`, `workflows/`, `activities/`, `persistence/`, `contracts/` and `kinds/` are
installed as `waystation.api`, ... (pyproject.toml's `package-dir`), so a plug-in's own `api` or
`workflows` package cannot collide with ours. Built offline from a copy of the sources, as
`pip install .` (the Dockerfile) builds it, and installed next to nothing else."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Each folder of the repository and the package it is installed as.
MAPPED = {"waystation": "waystation", "api": "waystation.api",
          "workflows": "waystation.workflows", "activities": "waystation.activities",
          "persistence": "waystation.persistence", "contracts": "waystation.contracts",
          "kinds": "waystation.kinds"}
OLD_NAMES = frozenset(MAPPED) - {"waystation"}
# Files of those folders that are not installed: the schema a person reads, generated from the
# migrations (`waystation schema --write`), which are installed.
NOT_INSTALLED = {"persistence/schema.sql"}


def source_files() -> list[Path]:
    return sorted(p.relative_to(ROOT) for folder in MAPPED for p in (ROOT / folder).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


def installed_path(source: Path) -> str:
    return "/".join([*MAPPED[source.parts[0]].split("."), *source.parts[1:]])


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    # A copy, so the build's own folders (build/, *.egg-info) never land in the checkout.
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in MAPPED:
        shutil.copytree(ROOT / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--wheel-dir", str(out), str(src)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    [built] = out.glob("waystation-*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_installs_waystation_alone(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"waystation"}, tops


def test_every_source_file_is_installed_under_its_package(wheel: zipfile.ZipFile) -> None:
    """A new sub-package left out of pyproject.toml's `packages`, or data outside its
    `package-data` patterns, would be missing from a regular install only."""
    names = set(wheel.namelist())
    missing = [f"{s} (as {installed_path(s)})" for s in source_files()
               if s.as_posix() not in NOT_INSTALLED and installed_path(s) not in names]
    assert missing == [], "not in the wheel:\n" + "\n".join(missing)


def test_the_builtin_kinds_entry_point_names_the_installed_package(
        wheel: zipfile.ZipFile) -> None:
    [entry_points] = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry_points).decode()
    assert "builtin = waystation.kinds:builtin_kinds" in text
    assert "waystation = waystation.cli:main" in text


def test_the_installed_wheel_imports_and_finds_its_data(wheel: zipfile.ZipFile,
                                                        tmp_path: Path) -> None:
    """Installed as files (no editable finder, no checkout on the path): the API, the kinds,
    the migrations and the console's static files are found under their installed names."""
    target = tmp_path / "site"
    wheel.extractall(target)
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from importlib import resources\n"
        "import waystation.api.app, waystation.kinds\n"
        "assert waystation.api.app.__file__.startswith(sys.argv[1]), waystation.api.app.__file__\n"
        "print(sorted(k.name for k in waystation.kinds.builtin_kinds()))\n"
        "files = resources.files\n"
        "assert any(p.name.endswith('.sql') for p in (files('waystation.persistence') / "
        "'migrations').iterdir())\n"
        "assert (files('waystation.api.console') / 'static' / 'index.html').is_file()\n")
    done = subprocess.run([sys.executable, "-c", probe, str(target)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == str(sorted(["validation", "batch", "mobile_agent",
                                                     "agent"]))


def test_no_source_imports_an_old_top_level_name() -> None:
    """An import of a folder's old top-level name (`api`, `kinds`, ...) still works in a
    checkout (the folder is on the path), as a second copy of the module; installed, it
    fails."""
    folders = [*MAPPED, "tests", "bench", "examples"]
    offences = []
    for path in sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py")
                       if ".venv" not in p.parts and "node_modules" not in p.parts):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            offences += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names
                         if n.split(".")[0] in OLD_NAMES]
    assert offences == [], "import these as waystation.*:\n" + "\n".join(offences)

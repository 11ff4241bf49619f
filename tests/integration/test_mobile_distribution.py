"""The mobile kind is a distribution of its own (`kinds/mobile`, issue 40): both wheels, built
offline from copies of the sources, installed into a fresh environment that sees no copy of the
checkout, migrate a database with the kind's migrations (`waystation migrate`), run a mobile
exploration on a real stack to its end and pass the kind's own tests; a mobile wheel built
without a bundled app's data fails there.

The fresh environment is a venv holding only the two wheels; the third-party packages they need
come from this interpreter's site-packages through a folder of links to it that leaves out every
distribution installed from the checkout (editable: Waystation, the mobile kind, the example
plug-ins), so neither `import` nor `importlib.metadata` (the entry points) can find them there.
The kind's tests use the core's test kit (the `tests` package's fixtures), copied on its own:
a folder holding `tests/` and no `waystation/`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MOBILE = ROOT / "kinds" / "mobile"
# The folders the root distribution is built from (its pyproject.toml's package-dir).
CORE_FOLDERS = ("waystation", "api", "workflows", "activities", "persistence", "contracts",
                "kinds")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "node_modules")
# What each wheel's build needs beside its packages.
BUILD_FILES = ("pyproject.toml", "README.md")

pytestmark = pytest.mark.slow


def build_wheel(src: Path, out: Path) -> Path:
    """The wheel of the project in `src`, built as `pip install` builds it, offline."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--wheel-dir", str(out), str(src)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    [built] = out.glob("*.whl")
    return built


def core_source(dest: Path) -> Path:
    """A copy of the root distribution's sources, without kinds/mobile: it builds without it."""
    for name in BUILD_FILES:
        shutil.copy(ROOT / name, dest / name)
    for folder in CORE_FOLDERS:
        shutil.copytree(ROOT / folder, dest / folder, ignore=without_mobile)
    return dest


def without_mobile(folder: str, names: list[str]) -> set[str]:
    skipped = set(IGNORED(folder, names))
    return skipped | {"mobile"} if Path(folder) == ROOT / "kinds" else skipped


def mobile_source(dest: Path, *, leave_out: str | None = None) -> Path:
    """A copy of kinds/mobile's sources (not its tests), with one file left out if asked."""
    shutil.copytree(MOBILE, dest, ignore=shutil.ignore_patterns(
        "__pycache__", "*.pyc", "*.egg-info", "build", "tests"))
    if leave_out is not None:
        (dest / leave_out).unlink()
    return dest


def editable_files(site: Path) -> set[str]:
    """The top-level entries of `site` that belong to a distribution installed editable (from
    a checkout): its dist-info and the files its RECORD lists (its .pth, its finder)."""
    hidden: set[str] = set()
    for info in site.glob("*.dist-info"):
        direct = info / "direct_url.json"
        if not direct.exists():
            continue
        if not json.loads(direct.read_text()).get("dir_info", {}).get("editable"):
            continue
        hidden.add(info.name)
        for line in (info / "RECORD").read_text().splitlines():
            hidden.add(line.split(",")[0].split("/")[0])
    return hidden


def fresh_environment(folder: Path, wheels: list[Path]) -> Path:
    """A venv with `wheels` installed and the rest of this interpreter's site-packages seen
    through links that leave the editable distributions out; returns its python."""
    site = Path(sysconfig.get_paths()["purelib"])
    hidden = editable_files(site)
    assert {"waystation-0.1.0.dist-info", "waystation_mobile-0.1.0.dist-info"} <= hidden, hidden
    deps = folder / "deps"
    deps.mkdir()
    for entry in site.iterdir():
        if entry.name not in hidden and not entry.name.endswith(".pth"):
            (deps / entry.name).symlink_to(entry)
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "-q", *map(str, wheels)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    [venv_site] = venv.glob("lib/python*/site-packages")
    (venv_site / "third_party.pth").write_text(f"{deps}\n")
    # The Temporal servers' binaries, which their packages install beside the interpreter.
    for binary in ("temporal", "temporal-test-server"):
        (venv / "bin" / binary).symlink_to(Path(sys.executable).parent / binary)
    return python


def run(python: Path, *args: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(python), *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


# What the fresh environment sees: each Waystation distribution once, from its own folder,
# and the kinds its registry finds.
PROBE = """
import json, sys
from importlib import metadata
import waystation, waystation_mobile
from waystation.sdk.testing import load_registry
dists = sorted((d.metadata["Name"], str(d.locate_file(""))) for d in metadata.distributions()
               if d.metadata["Name"].lower().startswith("waystation"))
print(json.dumps({"dists": dists, "files": [waystation.__file__, waystation_mobile.__file__],
                  "kinds": load_registry().names}))
"""

# A mobile exploration through the API of a local stack (Postgres, the Temporal dev server, a
# worker, the API), followed to its end; then its screen graph and the mobile kind's migrations.
EXPLORE = """
import asyncio, json
from waystation.sdk.testing import eventually, local_stack

async def main():
    async with local_stack() as stack:
        async with stack.client("alice") as http:
            started = await http.post("/runs", json={"kind": "mobile_agent", "input": {
                "app_package": "com.waystation.sample.notes", "driver": "simulator",
                "max_steps": 40, "sensitive_actions": "skip"}})
            assert started.status_code == 201, started.text
            run_id = started.json()["run_id"]

            async def ended():
                run = (await http.get(f"/runs/{run_id}")).json()
                return run if run["status"] in ("completed", "failed", "canceled") else None
            run = await eventually(ended, timeout=120, interval=0.5)
            graph = (await http.get(f"/runs/{run_id}/graph")).json()
        async with stack.pool.acquire() as conn:
            versions = [r["version"] for r in await conn.fetch(
                "SELECT version FROM schema_migrations ORDER BY version")]
    print(json.dumps({"status": run["status"], "screens": len(graph["screens"]),
                      "migrations": versions}))

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def workspace() -> Iterator[Path]:
    """A folder of this module's own, outside pytest's numbered folders: the pytest runs of
    other checkouts on this machine remove old ones, and the environment lives for minutes."""
    folder = Path(tempfile.mkdtemp(prefix="waystation-mobile-dist-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def new_folder(workspace: Path, name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=workspace))


@pytest.fixture(scope="module")
def wheels(workspace: Path) -> list[Path]:
    return [build_wheel(core_source(new_folder(workspace, "core")),
                        new_folder(workspace, "core-wheel")),
            build_wheel(mobile_source(new_folder(workspace, "mobile") / "src"),
                        new_folder(workspace, "mobile-wheel"))]


@pytest.fixture(scope="module")
def python(wheels: list[Path], workspace: Path) -> Path:
    return fresh_environment(new_folder(workspace, "env"), wheels)


def test_the_wheels_split_waystation_and_its_mobile_kind(wheels: list[Path]) -> None:
    core, mobile = (zipfile.ZipFile(w) for w in wheels)
    assert not [n for n in core.namelist() if "mobile" in n.split("/")[1:2]]
    tops = {n.split("/")[0] for n in mobile.namelist() if ".dist-info" not in n}
    assert tops == {"waystation_mobile"}, tops
    names = set(mobile.namelist())
    for data in ("waystation_mobile/console.js", "waystation_mobile/queries/graph.sql",
                 "waystation_mobile/migrations/085_mobile_screen_graph.sql",
                 "waystation_mobile/activities/simulator/apps/com.waystation.sample.notes/"
                 "app.json"):
        assert data in names, data
    [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "mobile = waystation_mobile.kind:MOBILE" in mobile.read(entry_points).decode()


def test_the_fresh_environment_sees_the_wheels_alone(python: Path, workspace: Path) -> None:
    done = run(python, "-c", PROBE, cwd=new_folder(workspace, "probe"), timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    venv = str(python.parents[1])
    assert [name for name, _ in seen["dists"]] == ["waystation", "waystation-mobile"], seen
    assert all(where.startswith(venv) for _, where in seen["dists"]), seen
    assert all(file.startswith(venv) for file in seen["files"]), seen
    assert seen["kinds"][-1] == "mobile_agent", seen


def test_an_exploration_runs_to_its_end_on_a_real_stack(python: Path, workspace: Path) -> None:
    done = run(python, "-c", EXPLORE, cwd=new_folder(workspace, "explore"), timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == "completed", result
    assert result["screens"] > 5, result
    # The kind's migrations, applied by the stack's migration through the entry point.
    assert {85, 86} <= set(result["migrations"]), result


def test_waystation_migrate_applies_the_installed_kind_s_migrations(python: Path,
                                                                     workspace: Path) -> None:
    """`waystation migrate` (as `up` and a worker migrate on start) finds the kind's migrations
    folder through its entry point: a plug-in's tables are made like a built-in kind's."""
    data = new_folder(workspace, "data")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(WAYSTATION_DATA_DIR=str(data))
    env.pop("DATABASE_URL", None)
    try:
        done = subprocess.run([str(python.parent / "waystation"), "migrate"], capture_output=True,
                              text=True, cwd=data, env=env, timeout=300)
    finally:
        run(python, "-c", "import sys; from pathlib import Path; from waystation.persistence."
            "embedded import stop_embedded; stop_embedded(Path(sys.argv[1]))",
            str(data / "pgdata"), cwd=data, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    applied = done.stdout.split("applied migrations: ", 1)[1].strip()
    assert {84, 85, 86} <= set(json.loads(applied)), done.stdout


def test_the_kinds_own_tests_pass_installed(python: Path, workspace: Path) -> None:
    """`pytest kinds/mobile/tests` (its default selection: all but `slow`) with the core's test
    kit beside it, as in the checkout, and neither distribution's sources."""
    kit = new_folder(workspace, "kit")
    shutil.copytree(ROOT / "tests", kit / "tests",
                    ignore=shutil.ignore_patterns("__pycache__", "node_modules", "histories",
                                                  "artifacts"))
    shutil.copytree(MOBILE / "tests", kit / "kinds" / "mobile" / "tests",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(MOBILE / "pyproject.toml", kit / "kinds" / "mobile" / "pyproject.toml")
    done = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "kinds/mobile/tests",
               f"--basetemp={kit / 'basetemp'}", cwd=kit, timeout=900)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    summary = done.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "error" not in summary and "failed" not in summary, summary


def test_a_wheel_without_its_data_fails_in_the_fresh_environment(
        workspace: Path, wheels: list[Path]) -> None:
    """The check can fail: the mobile wheel built without a bundled app's data cannot explore
    that app."""
    out = new_folder(workspace, "broken-wheel")
    broken = build_wheel(mobile_source(
        new_folder(workspace, "broken") / "src",
        leave_out="waystation_mobile/activities/simulator/apps/com.waystation.sample.notes/"
                  "app.json"), out)
    python = fresh_environment(new_folder(workspace, "broken-env"), [wheels[0], broken])
    done = run(python, "-c", EXPLORE, cwd=out, timeout=300)
    assert done.returncode != 0
    assert "the simulator has no app 'com.waystation.sample.notes'" in done.stderr, \
        done.stderr[-3000:]

"""The ADB driver against a fake `adb` on PATH that records commands and serves files."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from tests.mobile_helpers import NOTES
from waystation.kinds.mobile.activities.adb import AdbDriver, escape_input_text, parse_focus
from waystation.kinds.mobile.activities.driver import DriverError
from waystation.kinds.mobile.activities.identity import identify
from waystation.kinds.mobile.activities.simulator.driver import SimulatorDriver
from waystation.kinds.mobile.activities.uixml import parse_hierarchy

FAKE_ADB = """#!{python}
import json, sys
from pathlib import Path
here = Path({folder!r})
args = sys.argv[1:]
with open(here / "calls.jsonl", "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[:2] == ["-s", "emulator-5554"]:
    args = args[2:]
if args[:2] == ["exec-out", "cat"]:
    sys.stdout.buffer.write((here / "window_dump.xml").read_bytes())
elif args[:3] == ["exec-out", "screencap", "-p"]:
    sys.stdout.buffer.write((here / "screen.png").read_bytes())
elif args[:3] == ["shell", "dumpsys", "window"]:
    print("  mCurrentFocus=Window{{1b2c u0 {pkg}/{pkg}.MainActivity}}")
elif args[:3] == ["shell", "dumpsys", "package"]:
    print("      1a2b {pkg}/.MainActivity filter 3c4d")
    print("      1a2c {pkg}/{pkg}.SettingsActivity filter 3c4e")
elif args[:3] == ["shell", "uiautomator", "dump"]:
    print("UI hierchary dumped to: /sdcard/window_dump.xml")
elif args[:3] == ["shell", "input", "text"] and "fail" in args[3]:
    print("error: injection failed", file=sys.stderr)
    sys.exit(1)
"""


@pytest.fixture
async def fake_adb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    sim = SimulatorDriver(NOTES)
    await sim.launch(NOTES)
    await sim.observe()
    obs = await sim.observe()
    (tmp_path / "window_dump.xml").write_text(obs.xml)
    (tmp_path / "screen.png").write_bytes(obs.png)
    script = tmp_path / "adb"
    script.write_text(FAKE_ADB.format(python=sys.executable, folder=str(tmp_path), pkg=NOTES))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def calls(folder: Path) -> list[list[str]]:
    return [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]


async def test_adb_driver_speaks_adb(fake_adb: Path):
    adb = AdbDriver(serial="emulator-5554")
    await adb.launch(NOTES)
    obs = await adb.observe()
    assert obs.package == NOTES and obs.activity == ".MainActivity"
    assert obs.png.startswith(b"\x89PNG") and not identify(parse_hierarchy(obs.xml)).near_blank
    await adb.tap(10, 20)
    await adb.long_tap(10, 20)
    await adb.input_text(5, 6, "hello world")
    await adb.swipe(1, 900, 1, 300)
    await adb.back()
    assert await adb.declared_activities(NOTES) == [".MainActivity", ".SettingsActivity"]
    shell = [c[3:] for c in calls(fake_adb) if c[2] == "shell"]
    assert ["monkey", "-p", NOTES, "-c", "android.intent.category.LAUNCHER", "1"] in shell
    assert ["uiautomator", "dump", "/sdcard/window_dump.xml"] in shell
    assert ["input", "tap", "10", "20"] in shell
    assert ["input", "swipe", "10", "20", "10", "20", "800"] in shell
    assert ["input", "text", "'hello%sworld'"] in shell
    assert ["input", "swipe", "1", "900", "1", "300", "300"] in shell
    assert ["input", "keyevent", "4"] in shell
    assert all(c[:2] == ["-s", "emulator-5554"] for c in calls(fake_adb))


async def test_adb_failures_are_driver_errors(fake_adb: Path):
    with pytest.raises(DriverError, match="injection failed"):
        await AdbDriver().input_text(1, 1, "fail")
    with pytest.raises(DriverError, match="not found"):
        await AdbDriver(adb=str(fake_adb / "missing-adb")).back()


def test_focus_and_text_escaping():
    assert parse_focus("mCurrentFocus=Window{a u0 com.x/com.x.ui.Main}") == ("com.x", ".ui.Main")
    assert parse_focus("nothing") == ("", "")
    assert escape_input_text("a b&c") == "'a%sb&c'"

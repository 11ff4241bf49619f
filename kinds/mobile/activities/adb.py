"""The ADB driver: a real device or emulator, through the `adb` command line.

    observe   adb shell uiautomator dump /sdcard/window_dump.xml
              adb exec-out cat /sdcard/window_dump.xml
              adb exec-out screencap -p
              adb shell dumpsys window            (mCurrentFocus: package/activity)
    tap       adb shell input tap X Y
    long tap  adb shell input swipe X Y X Y 800
    text      adb shell input tap X Y; adb shell input text TEXT
    swipe     adb shell input swipe X1 Y1 X2 Y2 300
    back      adb shell input keyevent 4
    launch    adb shell monkey -p PACKAGE -c android.intent.category.LAUNCHER 1
    manifest  adb shell dumpsys package PACKAGE   (declared activities)

`-s SERIAL` picks the device when several are attached; the `adb` binary is found on PATH
(or WAYSTATION_ADB). Every command has a timeout; a failure is a DriverError, which the run
counts against its error budget. Tested against a fake `adb` script (tests/unit/test_mobile_adb.py).
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex

from waystation.kinds.mobile.activities.driver import DriverError, Observation

DUMP_PATH = "/sdcard/window_dump.xml"
COMMAND_TIMEOUT_S = 30.0
_FOCUS = re.compile(r"mCurrentFocus=Window\{[^ ]+ [^ ]+ ([\w.]+)/([\w.$]+)\}")
_RESUMED = re.compile(r"mResumedActivity: ActivityRecord\{[^ ]+ [^ ]+ ([\w.]+)/([\w.$]+)")
_ACTIVITY = re.compile(r"([\w.]+)/([\w.$]+) filter")


class AdbDriver:
    def __init__(self, serial: str | None = None, adb: str | None = None) -> None:
        self.serial = serial
        self.adb = adb or os.environ.get("WAYSTATION_ADB", "adb")

    async def _run(self, *args: str) -> bytes:
        argv = [self.adb, *(["-s", self.serial] if self.serial else []), *args]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        except FileNotFoundError as error:
            raise DriverError(f"adb not found ({self.adb})") from error
        try:
            out, err = await asyncio.wait_for(proc.communicate(), COMMAND_TIMEOUT_S)
        except TimeoutError as error:
            proc.kill()
            raise DriverError(f"timed out: {shlex.join(argv)}") from error
        if proc.returncode != 0:
            raise DriverError(f"{shlex.join(args)} failed ({proc.returncode}): "
                              f"{err.decode(errors='replace').strip()[:300]}")
        return out

    async def _shell(self, *args: str) -> str:
        return (await self._run("shell", *args)).decode(errors="replace")

    async def launch(self, package: str) -> None:
        await self._shell("monkey", "-p", package, "-c", "android.intent.category.LAUNCHER", "1")

    async def observe(self) -> Observation:
        await self._shell("uiautomator", "dump", DUMP_PATH)
        xml = (await self._run("exec-out", "cat", DUMP_PATH)).decode(errors="replace")
        png = await self._run("exec-out", "screencap", "-p")
        package, activity = parse_focus(await self._shell("dumpsys", "window"))
        return Observation(xml=xml, png=png, package=package, activity=activity)

    async def tap(self, x: int, y: int) -> None:
        await self._shell("input", "tap", str(x), str(y))

    async def long_tap(self, x: int, y: int) -> None:
        await self._shell("input", "swipe", str(x), str(y), str(x), str(y), "800")

    async def input_text(self, x: int, y: int, text: str) -> None:
        await self.tap(x, y)
        for command in typing_commands(text):
            await self._shell(*command)

    async def swipe(self, x1: int, y1: int, x2: int, y2: int) -> None:
        await self._shell("input", "swipe", str(x1), str(y1), str(x2), str(y2), "300")

    async def back(self) -> None:
        await self._shell("input", "keyevent", "4")

    async def declared_activities(self, package: str) -> list[str]:
        text = await self._shell("dumpsys", "package", package)
        found = []
        for pkg, activity in _ACTIVITY.findall(text):
            if pkg == package:
                name = activity.removeprefix(package) if activity.startswith(package) else activity
                if name not in found:
                    found.append(name)
        return found


def parse_focus(dumpsys: str) -> tuple[str, str]:
    """(package, activity) in focus; the activity relative to its package when it can be."""
    match = _FOCUS.search(dumpsys) or _RESUMED.search(dumpsys)
    if not match:
        return "", ""
    package, activity = match.groups()
    return package, activity.removeprefix(package) if activity.startswith(f"{package}.") \
        else activity


# Keys `input text` cannot type: a newline or tab would end or split the device shell's
# command line, so they are pressed as keys instead.
_KEYS = {"\n": "66", "\t": "61"}  # KEYCODE_ENTER, KEYCODE_TAB
_SEPARATOR = re.compile(r"([\n\t])")
# Other control characters (a carriage return, NUL, escape) have no key to press: dropped.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def typing_commands(text: str) -> list[list[str]]:
    """The `adb shell` commands that type `text`: `input text` per line and tab-free part,
    `input keyevent` for the newlines and tabs between."""
    commands = []
    for part in _SEPARATOR.split(_CONTROL.sub("", text)):
        if part in _KEYS:
            commands.append(["input", "keyevent", _KEYS[part]])
        elif part:
            commands.append(["input", "text", escape_input_text(part)])
    return commands


def escape_input_text(text: str) -> str:
    """One argument for `input text`, as the device shell will read it: `adb shell` joins its
    arguments into one command line for `sh -c`, so the text is single-quoted (nothing inside
    is expanded: `$(...)`, backquotes, `;`, quotes) and its spaces are `%s`, which `input`
    types as spaces."""
    return "'" + text.replace(" ", "%s").replace("'", "'\\''") + "'"

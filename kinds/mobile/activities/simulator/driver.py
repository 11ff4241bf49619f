"""The offline app simulator: a multi-screen app served from bundled files, behind the driver
interface a real device has.

Navigation is a back stack of screens. A tap finds the deepest element under the point that
has a transition (keyed by resource-id, or content-desc when the element has no id), so the
explorer must act on real coordinates exactly as on a device. Between visits the content
changes the way real apps' does: the clock ticks, counters count, lists grow and shrink and
their rows are rewritten. Screens marked `loading` first show a near-blank spinner. Tapping an
editor raises a keyboard window (another package, as on a device) that `back` dismisses first.
Leaving the app shows the launcher.
"""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from waystation.kinds.mobile.activities.driver import DriverError, Observation
from waystation.kinds.mobile.activities.simulator.render import render_png

LAUNCHER_PACKAGE = "com.android.launcher3"
KEYBOARD_PACKAGE = "com.google.android.inputmethod.latin"
_LAUNCHER_XML = (
    '<hierarchy rotation="0"><node index="0" text="" resource-id="" '
    'class="android.widget.FrameLayout" package="com.android.launcher3" content-desc="" '
    'checkable="false" checked="false" clickable="false" enabled="true" focusable="false" '
    'focused="false" scrollable="false" long-clickable="false" password="false" '
    'selected="false" bounds="[0,0][1080,2400]"><node index="0" text="Files" resource-id="" '
    'class="android.widget.TextView" package="com.android.launcher3" content-desc="Files" '
    'checkable="false" checked="false" clickable="true" enabled="true" focusable="true" '
    'focused="false" scrollable="false" long-clickable="true" password="false" '
    'selected="false" bounds="[60,1800][300,2100]" /></node></hierarchy>')
_LOADING_XML = (
    '<hierarchy rotation="0"><node index="0" text="" resource-id="" '
    'class="android.widget.FrameLayout" package="{pkg}" content-desc="" checkable="false" '
    'checked="false" clickable="false" enabled="true" focusable="false" focused="false" '
    'scrollable="false" long-clickable="false" password="false" selected="false" '
    'bounds="[0,0][1080,2400]"><node index="0" text="" resource-id="" '
    'class="android.widget.ProgressBar" package="{pkg}" content-desc="" checkable="false" '
    'checked="false" clickable="false" enabled="true" focusable="false" focused="false" '
    'scrollable="false" long-clickable="false" password="false" selected="false" '
    'bounds="[440,1100][640,1300]" /></node></hierarchy>')
_KEYBOARD = (
    '<node index="0" text="" resource-id="" class="android.widget.FrameLayout" '
    f'package="{KEYBOARD_PACKAGE}" content-desc="" checkable="false" checked="false" '
    'clickable="false" enabled="true" focusable="false" focused="false" scrollable="false" '
    'long-clickable="false" password="false" selected="false" bounds="[0,1500][1080,2274]">'
    '<node index="0" text="" resource-id="" class="android.view.View" '
    f'package="{KEYBOARD_PACKAGE}" content-desc="q" checkable="false" checked="false" '
    'clickable="true" enabled="true" focusable="true" focused="false" scrollable="false" '
    'long-clickable="true" password="false" selected="false" bounds="[0,1600][108,1750]" />'
    '</node>')
_BOUNDS_ATTR = "bounds"


def _apps_root() -> Any:
    return resources.files("waystation.kinds.mobile.activities.simulator") / "apps"


def bundled_packages() -> list[str]:
    return sorted(e.name for e in _apps_root().iterdir() if (e / "app.json").is_file())


@cache
def load_app(package: str) -> dict[str, Any]:
    folder = _apps_root() / package
    if not (folder / "app.json").is_file():
        raise DriverError(f"no bundled app {package!r}; bundled: {', '.join(bundled_packages())}")
    spec = json.loads((folder / "app.json").read_text())
    for screen in spec["screens"].values():
        screen["tree"] = ET.fromstring((folder / screen["hierarchy"]).read_text())
    return spec


def _parse_bounds(text: str) -> tuple[int, int, int, int]:
    a, b = text.strip("[]").split("][")
    x1, y1 = (int(v) for v in a.split(","))
    x2, y2 = (int(v) for v in b.split(","))
    return x1, y1, x2, y2


@dataclass
class SimulatorDriver:
    """One simulated device with one app installed."""

    package: str
    stack: list[str] = field(default_factory=list)
    visits: dict[str, int] = field(default_factory=dict)
    loading_shown: set[int] = field(default_factory=set)
    keyboard: bool = False
    ticks: int = 0
    scroll: int = 0
    render: bool = True

    def __post_init__(self) -> None:
        self.app = load_app(self.package)

    # --- the driver interface -------------------------------------------------------------

    async def launch(self, package: str) -> None:
        if package != self.package:
            raise DriverError(f"{package} is not installed on this simulator")
        self._go([self.app["launch"]])

    async def declared_activities(self, package: str) -> list[str]:
        return list(self.app["declared_activities"])

    async def observe(self) -> Observation:
        xml, activity, package = self._current_xml()
        png = render_png(xml) if self.render else b""
        return Observation(xml=xml, png=png, package=package, activity=activity)

    async def tap(self, x: int, y: int) -> None:
        self._tick()
        if not self.stack:
            if self._hit(ET.fromstring(_LAUNCHER_XML), x, y) == "Files":
                raise DriverError("the launcher opened another app")
            return
        screen = self.app["screens"][self.stack[-1]]
        key = self._hit(self._filled(self.stack[-1]), x, y, screen["transitions"])
        if key is None:
            return
        target = screen["transitions"].get(key)
        if target is None:
            self.keyboard = True  # only editors get past _hit without a transition
        elif target == "back":
            await self.back()
        else:
            self._go(self.stack + [target])

    async def long_tap(self, x: int, y: int) -> None:
        self._tick()

    async def input_text(self, x: int, y: int, text: str) -> None:
        await self.tap(x, y)
        self.keyboard = True

    async def swipe(self, x1: int, y1: int, x2: int, y2: int) -> None:
        self._tick()
        self.scroll += 1

    async def back(self) -> None:
        self._tick()
        if self.keyboard:
            self.keyboard = False
            return
        self._go(self.stack[:-1])

    # --- internals ------------------------------------------------------------------------

    def _tick(self) -> None:
        self.ticks += 1

    def _go(self, stack: list[str]) -> None:
        self.stack, self.keyboard, self.scroll = stack, False, 0
        if stack:
            self.visits[stack[-1]] = self.visits.get(stack[-1], 0) + 1

    def _current_xml(self) -> tuple[str, str, str]:
        if not self.stack:
            return _LAUNCHER_XML, ".Launcher", LAUNCHER_PACKAGE
        name = self.stack[-1]
        screen = self.app["screens"][name]
        arrival = self.ticks * 1000 + len(self.stack)
        if screen.get("loading") and arrival not in self.loading_shown:
            # The first look after arriving catches the splash; the next one the content.
            self.loading_shown.add(arrival)
            return _LOADING_XML.replace("{pkg}", self.package), screen["activity"], self.package
        tree = self._filled(name)
        if self.keyboard:
            tree.append(ET.fromstring(_KEYBOARD))
        return ET.tostring(tree, encoding="unicode"), screen["activity"], self.package

    def _filled(self, name: str) -> ET.Element:
        screen = self.app["screens"][name]
        tree = copy.deepcopy(screen["tree"])
        visit = self.visits.get(name, 1)
        values = {"{clock}": f"{9 + self.ticks // 60 % 12:02d}:{self.ticks % 60:02d}",
                  "{counter}": str(visit * 7 % 100), "{visit}": str(visit)}
        rows = screen.get("lists", {})
        for parent in tree.iter("node"):
            rid = parent.get("resource-id", "")
            if rid in rows and len(parent):
                lo, hi = rows[rid]
                self._repeat_rows(parent, lo + (visit + self.scroll) % (hi - lo + 1), visit)
        for el in tree.iter("node"):
            text = el.get("text", "")
            if "{" in text:
                for token, value in values.items():
                    text = text.replace(token, value)
                el.set("text", text)
        return tree

    def _repeat_rows(self, container: ET.Element, count: int, visit: int) -> None:
        template = container[0]
        container.remove(template)
        height = _parse_bounds(template.get(_BOUNDS_ATTR, "[0,0][0,0]"))
        row_h = height[3] - height[1]
        fits = (_parse_bounds(container.get(_BOUNDS_ATTR, "[0,0][0,0]"))[3] - height[1]) // row_h
        # Like a RecyclerView, only rows that fit are laid out (and dumped).
        for i in range(min(count, fits)):
            row = copy.deepcopy(template)
            row.set("index", str(i))
            for el in row.iter("node"):
                x1, y1, x2, y2 = _parse_bounds(el.get(_BOUNDS_ATTR, "[0,0][0,0]"))
                el.set(_BOUNDS_ATTR, f"[{x1},{y1 + i * row_h}][{x2},{y2 + i * row_h}]")
                if "{n}" in el.get("text", ""):
                    number = str(i + 1 + visit + self.scroll)
                    el.set("text", el.get("text", "").replace("{n}", number))
            container.append(row)

    def _hit(self, tree: ET.Element, x: int, y: int,
             transitions: dict[str, str] | None = None) -> str | None:
        """The transition key of the deepest element under (x, y) that has one."""
        found: str | None = None
        for el in tree.iter("node"):
            x1, y1, x2, y2 = _parse_bounds(el.get(_BOUNDS_ATTR, "[0,0][0,0]"))
            if not (x1 <= x < x2 and y1 <= y < y2):
                continue
            for key in (el.get("resource-id", ""), el.get("content-desc", "")):
                if key and (transitions is None or key in transitions or
                            el.get("class", "").endswith("EditText")):
                    found = key
        return found

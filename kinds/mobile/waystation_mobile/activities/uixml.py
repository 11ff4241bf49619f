"""Parser for what `uiautomator dump` writes, tolerant of what real devices add.

The format is `<hierarchy rotation="0">` with nested `<node index text resource-id class
package content-desc checkable checked clickable enabled focusable focused scrollable
long-clickable password selected bounds="[x1,y1][x2,y2]">`. Real dumps also carry `NAF="true"`
(not accessibility friendly), `visible-to-user`, `drawing-order`, `hint`, rotations 1-3 and,
with several windows, more than one top-level node: the status bar, the navigation bar and the
keyboard come from `com.android.systemui` and the input method's package. Unknown attributes
are ignored and missing ones default, so a new Android release does not break identity.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field

_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")

# Windows that are not the app: excluded from identity, cropped from screenshots.
SYSTEM_PACKAGES = frozenset({
    "com.android.systemui", "android", "com.google.android.inputmethod.latin",
    "com.android.inputmethod.latin", "com.samsung.android.honeyboard",
    "com.google.android.apps.nexuslauncher.overlay",
})
INPUT_METHOD_HINT = "inputmethod"


class HierarchyError(ValueError):
    """The text is not a uiautomator hierarchy."""


@dataclass
class UiNode:
    cls: str
    resource_id: str
    package: str
    text: str
    content_desc: str
    bounds: tuple[int, int, int, int]
    clickable: bool = False
    long_clickable: bool = False
    checkable: bool = False
    scrollable: bool = False
    password: bool = False
    enabled: bool = True
    visible_to_user: bool = True
    index: int = 0
    children: list[UiNode] = field(default_factory=list)
    path: str = ""

    @property
    def editable(self) -> bool:
        # uiautomator has no `editable` attribute; EditText (and subclasses) are the editors.
        return self.cls.endswith("EditText") or "AutoCompleteTextView" in self.cls

    @property
    def area(self) -> int:
        x1, y1, x2, y2 = self.bounds
        return max(0, x2 - x1) * max(0, y2 - y1)

    @property
    def center(self) -> tuple[int, int]:
        x1, y1, x2, y2 = self.bounds
        return (x1 + x2) // 2, (y1 + y2) // 2

    @property
    def is_system(self) -> bool:
        return self.package in SYSTEM_PACKAGES or INPUT_METHOD_HINT in self.package

    def walk(self) -> list[UiNode]:
        out = [self]
        for child in self.children:
            out.extend(child.walk())
        return out


@dataclass
class Hierarchy:
    rotation: int
    roots: list[UiNode]
    screen: tuple[int, int, int, int]

    def app_roots(self) -> list[UiNode]:
        return [r for r in self.roots if not r.is_system]

    def foreground_package(self) -> str | None:
        """The package owning most on-screen area among non-system windows."""
        areas: Counter[str] = Counter()
        for root in self.app_roots():
            areas[root.package] += root.area
        return areas.most_common(1)[0][0] if areas else None

    def system_bands(self) -> tuple[int, int]:
        """Heights of the status bar (top) and navigation bar (bottom) windows, if dumped."""
        top = bottom = 0
        _, sy1, _, sy2 = self.screen
        for root in self.roots:
            if root.package != "com.android.systemui":
                continue
            x1, y1, x2, y2 = root.bounds
            if y1 <= sy1 and y2 < (sy1 + sy2) // 2:
                top = max(top, y2 - sy1)
            elif y2 >= sy2 and y1 > (sy1 + sy2) // 2:
                bottom = max(bottom, sy2 - y1)
        return top, bottom


def _flag(el: ET.Element, name: str) -> bool:
    return el.get(name, "false").lower() == "true"


def _bounds(text: str | None) -> tuple[int, int, int, int]:
    match = _BOUNDS.fullmatch((text or "").strip())
    if not match:
        return (0, 0, 0, 0)
    x1, y1, x2, y2 = (int(v) for v in match.groups())
    return (x1, y1, x2, y2)


def _node(el: ET.Element, path: str) -> UiNode:
    node = UiNode(
        cls=el.get("class", ""), resource_id=el.get("resource-id", ""),
        package=el.get("package", ""), text=el.get("text", ""),
        content_desc=el.get("content-desc", ""), bounds=_bounds(el.get("bounds")),
        clickable=_flag(el, "clickable"), long_clickable=_flag(el, "long-clickable"),
        checkable=_flag(el, "checkable"), scrollable=_flag(el, "scrollable"),
        password=_flag(el, "password"), enabled=el.get("enabled", "true").lower() != "false",
        visible_to_user=el.get("visible-to-user", "true").lower() != "false",
        index=int(el.get("index", "0") or 0) if (el.get("index") or "0").isdigit() else 0,
        path=path)
    node.children = [_node(child, f"{path}/{i}")
                     for i, child in enumerate(c for c in el if c.tag == "node")]
    return node


def parse_hierarchy(xml: str | bytes) -> Hierarchy:
    """Parse a dump; the text `UI hierchary dumped to: ...` adb prints after it is tolerated."""
    if isinstance(xml, bytes):
        xml = xml.decode("utf-8", errors="replace")
    start, end = xml.find("<hierarchy"), xml.rfind("</hierarchy>")
    if start < 0:
        raise HierarchyError("no <hierarchy> element in the dump")
    body = xml[start:end + len("</hierarchy>")] if end >= 0 else xml[start:]
    try:
        root = ET.fromstring(body)
    except ET.ParseError as error:
        raise HierarchyError(f"malformed hierarchy: {error}") from error
    rotation = int(root.get("rotation", "0") or 0) if root.get("rotation", "0").isdigit() else 0
    roots = [_node(el, str(i)) for i, el in enumerate(c for c in root if c.tag == "node")]
    return Hierarchy(rotation=rotation, roots=roots, screen=_screen_rect(roots))


def _screen_rect(roots: list[UiNode]) -> tuple[int, int, int, int]:
    # The dump does not state the display size; the union of the windows is it (rotation
    # already applied by the device, so width and height swap on their own).
    boxes = [r.bounds for r in roots if r.area > 0]
    if not boxes:
        return (0, 0, 0, 0)
    return (min(b[0] for b in boxes), min(b[1] for b in boxes),
            max(b[2] for b in boxes), max(b[3] for b in boxes))

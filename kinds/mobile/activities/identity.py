"""Screen identity: when are two observations the same screen?

Following DroidBot (`structure_str`), Fastbot (widget hash) and Baek & Bae's comparison levels,
a screen is keyed by (package, activity, layout hash):

- **layout hash**: a digest of the tree of *visible, on-screen, non-system* nodes, each written
  as `class|resource-id|flags`, where resource-id has its digits folded (`item_12` and
  `item_13` are one widget kind) and flags are the action flags clickable, long-clickable,
  checkable, scrollable, editable and password. Text, content-desc, bounds, index and the
  checked/selected/focused states are left out: they change while the screen stays the same
  (a clock ticks, a counter counts, a box gets ticked). Children of list containers
  (RecyclerView, ListView, GridView, ViewPager, or anything scrollable) are folded into the
  *set* of their distinct row skeletons, so adding, removing or rewriting rows keeps the key.
- **content hash** (stored, not part of the key): the visible text and content-desc with
  digits folded, to tell apart variants of one screen when somebody wants to.
- **perceptual hash** (stored, not part of the key): `imagehash.phash` of the screenshot with
  the status and navigation bars cropped, 64 bits as a signed BIGINT; measured on real apps,
  clock or counter changes move it by 0-4 bits and different activities by 14 or more, so
  `bit_count(a # b)` finds look-alike screens across layout changes.
- A **near-blank** screen (no actionable and no text-bearing visible node) is transitional:
  a splash or a loading state. The caller waits and observes again.
"""

from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass

from waystation.kinds.mobile.activities.uixml import Hierarchy, UiNode

LIST_CLASSES = ("RecyclerView", "ListView", "GridView", "ViewPager", "ViewPager2",
                "AbsListView", "ScrollView", "HorizontalScrollView", "NestedScrollView")
_DIGITS = re.compile(r"\d+")
# Without status/navigation bar windows in the dump, crop these shares of the screenshot.
STATUS_BAR_FRACTION = 0.03
NAV_BAR_FRACTION = 0.05


def fold_digits(text: str) -> str:
    return _DIGITS.sub("#", text)


def is_list_container(node: UiNode) -> bool:
    short = node.cls.rsplit(".", 1)[-1]
    return node.scrollable or short in LIST_CLASSES


def _on_screen(node: UiNode, screen: tuple[int, int, int, int]) -> bool:
    x1, y1, x2, y2 = node.bounds
    sx1, sy1, sx2, sy2 = screen
    return node.visible_to_user and x2 > x1 and y2 > y1 and \
        x1 < sx2 and x2 > sx1 and y1 < sy2 and y2 > sy1


def _flags(node: UiNode) -> str:
    return "".join(letter if on else "-" for letter, on in (
        ("c", node.clickable), ("l", node.long_clickable), ("k", node.checkable),
        ("s", node.scrollable), ("e", node.editable), ("p", node.password)))


def _signature(node: UiNode) -> str:
    return f"{node.cls}|{fold_digits(node.resource_id)}|{_flags(node)}"


def _skeleton(node: UiNode, screen: tuple[int, int, int, int]) -> str:
    if not _on_screen(node, screen):
        return ""
    kids = [s for s in (_skeleton(c, screen) for c in node.children) if s]
    if is_list_container(node):
        # A set, sorted: row count and order do not matter, only which row kinds exist.
        return f"{_signature(node)}[{';'.join(sorted(set(kids)))}]"
    return f"{_signature(node)}({';'.join(kids)})" if kids else _signature(node)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class ActionInfo:
    """An actionable element with a selector that stays the same across visits."""

    selector: str
    kind: str  # tap | long_tap | input | scroll | back
    label: str
    x: int
    y: int
    bounds: tuple[int, int, int, int]
    # For list rows: the list's selector and the row's position (saturation works on these).
    row_group: str | None = None
    row_index: int | None = None


@dataclass(frozen=True)
class ScreenIdentity:
    package: str
    layout_hash: str
    content_hash: str
    actions: tuple[ActionInfo, ...]
    near_blank: bool
    structure: str


def _label(node: UiNode) -> str:
    return (node.text or node.content_desc or node.resource_id.rsplit("/", 1)[-1]
            or node.cls.rsplit(".", 1)[-1])[:80]


def _base_selector(node: UiNode) -> str:
    if node.resource_id:
        return f"{node.cls.rsplit('.', 1)[-1]}#{node.resource_id.split(':id/')[-1]}"
    # No id: the element's words (digits folded) name it; a path would break on any reflow.
    return f"{node.cls.rsplit('.', 1)[-1]}~{fold_digits(node.text or node.content_desc)[:40]}"


def _collect_actions(node: UiNode, screen: tuple[int, int, int, int], out: list[ActionInfo],
                     seen: dict[str, int], row: tuple[str, int] | None) -> None:
    if not _on_screen(node, screen) or (not node.enabled and not node.children):
        return
    selector = _base_selector(node)
    if row is not None:
        selector = f"{row[0]}>row[{row[1]}]>{selector}"
    count = seen.get(selector, 0)
    seen[selector] = count + 1
    if count:
        selector = f"{selector}@{count}"
    group, index = (row[0], row[1]) if row else (None, None)
    cx, cy = node.center
    if node.enabled:
        if node.editable:
            out.append(ActionInfo(selector, "input", _label(node), cx, cy, node.bounds,
                                  group, index))
        elif node.clickable or node.checkable:
            out.append(ActionInfo(selector, "tap", _label(node), cx, cy, node.bounds,
                                  group, index))
        if node.long_clickable:
            out.append(ActionInfo(selector, "long_tap", _label(node), cx, cy, node.bounds,
                                  group, index))
        if node.scrollable:
            out.append(ActionInfo(selector, "scroll", _label(node), cx, cy, node.bounds))
    if is_list_container(node):
        rows = [c for c in node.children if _on_screen(c, screen)]
        for i, child in enumerate(rows):
            _collect_actions(child, screen, out, seen, (selector, i))
        return
    for child in node.children:
        _collect_actions(child, screen, out, seen, row)


def identify(hierarchy: Hierarchy) -> ScreenIdentity:
    """The identity of an observed screen, from its hierarchy alone."""
    roots = hierarchy.app_roots()
    package = hierarchy.foreground_package() or ""
    screen = hierarchy.screen
    structure = "\n".join(s for s in (_skeleton(r, screen) for r in roots) if s)
    words: list[str] = []
    has_content = False
    for root in roots:
        for node in root.walk():
            if not _on_screen(node, screen):
                continue
            for text in (node.text, node.content_desc):
                if text:
                    words.append(fold_digits(text))
                    has_content = True
    actions: list[ActionInfo] = []
    seen: dict[str, int] = {}
    for root in roots:
        _collect_actions(root, screen, actions, seen, None)
    actions.append(ActionInfo("back", "back", "back", 0, 0, (0, 0, 0, 0)))
    near_blank = not has_content and len(actions) == 1
    return ScreenIdentity(package=package, layout_hash=_digest(structure),
                          content_hash=_digest("\n".join(words)), actions=tuple(actions),
                          near_blank=near_blank, structure=structure)


def perceptual_hash(png: bytes, hierarchy: Hierarchy | None = None) -> int:
    """64-bit pHash of the screenshot without the system bars, as a signed 64-bit integer."""
    import imagehash
    from PIL import Image

    image = Image.open(io.BytesIO(png))
    width, height = image.size
    top, bottom = int(height * STATUS_BAR_FRACTION), int(height * NAV_BAR_FRACTION)
    if hierarchy is not None and hierarchy.screen[3] > 0:
        scale = height / hierarchy.screen[3]
        bands = hierarchy.system_bands()
        if any(bands):
            top, bottom = int(bands[0] * scale), int(bands[1] * scale)
    cropped = image.crop((0, top, width, max(top + 1, height - bottom)))
    value = int(str(imagehash.phash(cropped)), 16)
    return value - (1 << 64) if value >= 1 << 63 else value


def hamming(a: int, b: int) -> int:
    return ((a ^ b) & ((1 << 64) - 1)).bit_count()

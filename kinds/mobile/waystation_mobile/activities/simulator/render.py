"""Screenshots rendered from a hierarchy, so the simulator's images change with its content.

Rendered at a quarter of the device resolution: the perceptual hash looks at 32x32 pixels
anyway, and a small PNG keeps the artifact store and the graph picture light.
"""

from __future__ import annotations

import hashlib
import io
import re
import xml.etree.ElementTree as ET

from PIL import Image, ImageDraw, ImageFont

SCALE = 4
_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")
# The built-in bitmap font: no font files to ship, and ten times cheaper than FreeType.
_FONT = ImageFont.load_default_imagefont()


def _color(seed: str, light: bool) -> tuple[int, int, int]:
    digest = hashlib.md5(seed.encode()).digest()
    base = 170 if light else 40
    return tuple(base + digest[i] % 80 for i in range(3))  # type: ignore[return-value]


def render_png(xml: str) -> bytes:
    root = ET.fromstring(xml[xml.find("<hierarchy"):])
    nodes = list(root.iter("node"))
    boxes = [tuple(int(v) for v in m.groups())
             for m in (_BOUNDS.fullmatch(n.get("bounds", "")) for n in nodes) if m]
    width = max((b[2] for b in boxes), default=1080) // SCALE
    height = max((b[3] for b in boxes), default=2400) // SCALE
    image = Image.new("RGB", (max(width, 1), max(height, 1)), (250, 250, 250))
    draw = ImageDraw.Draw(image)
    for node in nodes:
        match = _BOUNDS.fullmatch(node.get("bounds", ""))
        if not match:
            continue
        x1, y1, x2, y2 = (int(v) // SCALE for v in match.groups())
        if x2 <= x1 or y2 <= y1:
            continue
        cls = node.get("class", "")
        rid = node.get("resource-id", "")
        if node.get("clickable") == "true" or cls.endswith(("Layout", "ViewGroup")):
            draw.rectangle((x1, y1, x2 - 1, y2 - 1), fill=_color(rid or cls, light=True),
                           outline=_color(cls, light=False))
        text = node.get("text") or node.get("content-desc") or ""
        if text:
            # The bitmap font covers Latin-1 only; other characters show as "?".
            shown = text[:40].encode("latin-1", "replace").decode("latin-1")
            draw.text((x1 + 3, y1 + 3), shown, fill=(20, 20, 20), font=_FONT)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=False, compress_level=1)
    return out.getvalue()

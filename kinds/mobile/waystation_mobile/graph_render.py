"""The screen graph as Graphviz DOT, Mermaid, an HTML/SVG picture and DroidBot's `utg.js`.

Input is the JSON form the API returns (screens and edges); rendering is pure so the same
functions serve an app's graph and a run's. Labels are escaped for each format: screen labels
and action texts come from apps, which anybody can write.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Callable
from typing import Any

Graph = dict[str, Any]
# Screenshots per activity column in the picture, and their size there.
THUMB_W, THUMB_H, GAP = 135, 300, 40


def _screen_label(screen: dict[str, Any]) -> str:
    return f"{screen['activity'].rsplit('.', 1)[-1]} #{screen['id']}"


def _edge_label(edge: dict[str, Any]) -> str:
    return f"{edge['action']['kind']} {edge['action']['label']}".strip()[:40]


def to_dot(graph: Graph) -> str:
    def q(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'
    lines = [f"digraph {q(graph['app_package'])} {{", "  rankdir=LR;",
             "  node [shape=box, style=rounded];"]
    by_activity: dict[str, list[dict[str, Any]]] = {}
    for screen in graph["screens"]:
        by_activity.setdefault(screen["activity"], []).append(screen)
    for i, (activity, screens) in enumerate(sorted(by_activity.items())):
        lines.append(f"  subgraph cluster_{i} {{ label={q(activity)};")
        for s in screens:
            lines.append(f"    s{s['id']} [label={q(_screen_label(s))}];")
        lines.append("  }")
    for e in graph["edges"]:
        lines.append(f"  s{e['from']} -> s{e['to']} [label={q(_edge_label(e))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_mermaid(graph: Graph) -> str:
    def q(text: str) -> str:
        return '"' + html.escape(text).replace('"', "#quot;") + '"'
    lines = ["flowchart LR"]
    by_activity: dict[str, list[dict[str, Any]]] = {}
    for screen in graph["screens"]:
        by_activity.setdefault(screen["activity"], []).append(screen)
    for i, (activity, screens) in enumerate(sorted(by_activity.items())):
        lines.append(f"  subgraph a{i}[{q(activity)}]")
        for s in screens:
            lines.append(f"    s{s['id']}[{q(_screen_label(s))}]")
        lines.append("  end")
    for e in graph["edges"]:
        lines.append(f"  s{e['from']} -->|{q(_edge_label(e))}| s{e['to']}")
    return "\n".join(lines) + "\n"


def to_html(graph: Graph, screenshot: Callable[[str], bytes | None]) -> str:
    """An SVG in a page: screenshots as nodes, one column per activity, edges as arrows."""
    by_activity: dict[str, list[dict[str, Any]]] = {}
    for screen in graph["screens"]:
        by_activity.setdefault(screen["activity"], []).append(screen)
    pos: dict[int, tuple[int, int]] = {}
    parts: list[str] = []
    col_w = THUMB_W + 3 * GAP
    height = GAP
    for col, (activity, screens) in enumerate(sorted(by_activity.items())):
        x = GAP + col * col_w
        box_h = len(screens) * (THUMB_H + GAP + 20) + GAP
        height = max(height, box_h + 2 * GAP)
        parts.append(f'<g class="cluster"><rect x="{x - GAP // 2}" y="{GAP // 2}" '
                     f'width="{THUMB_W + GAP}" height="{box_h}" rx="8"/>'
                     f'<text x="{x}" y="{GAP // 2 + 16}">{html.escape(activity)}</text></g>')
        for row, s in enumerate(screens):
            y = GAP + 10 + row * (THUMB_H + GAP + 20)
            pos[s["id"]] = (x, y)
            data = screenshot(s["screenshot_sha"]) if s.get("screenshot_sha") else None
            image = (f'<image x="{x}" y="{y + 14}" width="{THUMB_W}" height="{THUMB_H}" '
                     f'href="data:image/png;base64,{base64.b64encode(data).decode()}"/>'
                     if data else
                     f'<rect x="{x}" y="{y + 14}" width="{THUMB_W}" height="{THUMB_H}" '
                     'class="blank"/>')
            parts.append(f'<g class="screen" id="s{s["id"]}"><title>'
                         f'{html.escape(s["layout_hash"])} · visits {s.get("visit_count", 1)}'
                         f'</title><text x="{x}" y="{y + 10}">{html.escape(_screen_label(s))}'
                         f'</text>{image}</g>')
    for e in graph["edges"]:
        if e["from"] not in pos or e["to"] not in pos or e["from"] == e["to"]:
            continue
        (x1, y1), (x2, y2) = pos[e["from"]], pos[e["to"]]
        sx, sy = x1 + THUMB_W, y1 + THUMB_H // 2
        ex, ey = (x2, y2 + THUMB_H // 2) if x2 > x1 else (x2 + THUMB_W, y2 + THUMB_H // 3)
        parts.append(f'<path class="edge" d="M{sx},{sy} C{sx + 60},{sy} {ex - 60},{ey} '
                     f'{ex},{ey}" marker-end="url(#arrow)"><title>'
                     f'{html.escape(_edge_label(e))} ×{e.get("count", 1)}</title></path>')
    width = GAP * 2 + max(1, len(by_activity)) * col_w
    title = html.escape(f"Screen graph of {graph['app_package']}")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>"
        "body{font-family:sans-serif;margin:1em} .cluster rect{fill:#f4f6fb;stroke:#99a}"
        " .edge{fill:none;stroke:#c33;stroke-opacity:.55;stroke-width:1.5}"
        " image,.blank{stroke:#333} .blank{fill:#ddd} text{font-size:12px}"
        f"</style></head><body><h1>{title}</h1><p>{len(graph['screens'])} screens, "
        f"{len(graph['edges'])} edges</p>"
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#c33"/></marker>'
        f"</defs>{''.join(parts)}</svg></body></html>\n")


def to_utg_js(graph: Graph, image_url: Callable[[str], str]) -> str:
    """DroidBot's `utg.js`: `var utg = {nodes, edges, ...}` that its viewer opens."""
    nodes = [{"id": str(s["id"]), "label": _screen_label(s), "state_str": s["layout_hash"],
              "structure_str": s["layout_hash"], "activity": s["activity"],
              "package": graph["app_package"],
              "image": image_url(s["screenshot_sha"]) if s.get("screenshot_sha") else "",
              "title": f"<table><tr><th>activity</th><td>{html.escape(s['activity'])}</td>"
                       f"</tr></table>"} for s in graph["screens"]]
    edges = [{"from": str(e["from"]), "to": str(e["to"]), "id": f"{e['from']}-->{e['to']}",
              "label": _edge_label(e), "events": [{"event_str": _edge_label(e),
                                                    "event_id": e["action_id"]}]}
             for e in graph["edges"]]
    utg = {"nodes": nodes, "edges": edges, "num_nodes": len(nodes), "num_edges": len(edges),
           "app_package": graph["app_package"]}
    return "var utg = \n" + json.dumps(utg, indent=1)

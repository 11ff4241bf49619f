"""The screen graph a mobile exploration run recorded, as JSON: screens and the edges (actions)
between them."""

from __future__ import annotations

from typing import Any

import asyncpg

from waystation.kinds.mobile import repository as graph_repo
from waystation.sdk import ApiError
from waystation.sdk.reads import RunRow


def graph_json(package: str, screens: list[dict[str, Any]], edges: list[dict[str, Any]],
               **extra: Any) -> dict[str, Any]:
    """The graph's JSON from the repository's screens and edges (an app's or one run's)."""
    return {
        "app_package": package, **extra,
        "screens": [{k: (str(v) if k == "first_run_id" and v else v) for k, v in s.items()}
                    for s in screens],
        "edges": [{"id": e["id"], "from": e["from_screen_id"], "to": e["to_screen_id"],
                   "action_id": e["action_id"], "count": e["count"],
                   "action": {"selector": e["selector"], "kind": e["action_kind"],
                              "label": e["action_label"]},
                   "first_seen_at": e["first_seen_at"], "last_seen_at": e["last_seen_at"]}
                  for e in edges],
    }


async def run_graph(conn: asyncpg.Connection, run: RunRow) -> dict[str, Any]:
    """The part of the app's graph one run saw, with edge counts within the run; 404 for a run
    that is not a mobile exploration."""
    if run.kind != "mobile_agent":
        raise ApiError(404, "graph_not_found", f"run {run.id} is not a mobile_agent run")
    screens, edges = await graph_repo.run_graph(conn, run.id)
    return graph_json(run.input["app_package"], screens, edges, run_id=str(run.id))

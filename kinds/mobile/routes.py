"""The screen graph: per app (accumulated over runs) and per run; coverage; artifacts.

Authorization: a run's graph follows the run (its owner or the service role). An app's graph
and coverage, and an artifact (content-addressed, shared by every run that saw the same bytes),
may be read by whoever may read at least one run that produced them; anyone else gets the same
404 as for an app or artifact that does not exist, so what others explored stays unknown.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import asyncpg
from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse

from waystation.kinds.mobile import graph_render
from waystation.kinds.mobile import repository as graph_repo
from waystation.kinds.mobile import service as graphs
from waystation.sdk import ApiError
from waystation.sdk.artifacts import LocalArtifactStore
from waystation.sdk.routes import (
    SAME_ORIGIN_FRAME_HEADERS,
    Conn,
    CurrentUser,
    SettingsDep,
    VisibleRun,
)
from waystation.sdk.schemas import PACKAGE_PATTERN
from waystation.sdk.services import User

router = APIRouter(tags=["screen graph"])

Format = Literal["json", "dot", "mermaid", "html", "utg"]
Package = Annotated[str, Path(pattern=PACKAGE_PATTERN, max_length=200)]
_MEDIA = {"dot": "text/vnd.graphviz", "mermaid": "text/plain",
          "utg": "application/javascript"}
_TEXT = {"schema": {"type": "string"}}
# What `format` picks between, documented so the schema names every answer's content type.
GRAPH_RESPONSES: dict[int | str, dict[str, Any]] = {200: {
    "description": "The graph as JSON, DOT, Mermaid, an HTML page or utg.js",
    "content": {"application/json": {"schema": {"type": "object"}},
                **{media: _TEXT for media in _MEDIA.values()}, "text/html": _TEXT}}}
ARTIFACT_RESPONSES: dict[int | str, dict[str, Any]] = {200: {
    "description": "A screenshot (PNG) or a view hierarchy (XML)",
    "content": {"image/png": {"schema": {"type": "string", "format": "binary"}},
                "application/xml": _TEXT}}}


async def _render(graph: dict[str, Any], fmt: Format, request: Request, settings: Any,
                  conn: asyncpg.Connection, user: User) -> Any:
    if fmt == "json":
        return graph
    if fmt == "dot":
        return PlainTextResponse(graph_render.to_dot(graph), media_type=_MEDIA["dot"])
    if fmt == "mermaid":
        return PlainTextResponse(graph_render.to_mermaid(graph), media_type=_MEDIA["mermaid"])
    store = LocalArtifactStore(settings.artifact_path)
    if fmt == "utg":
        return PlainTextResponse(graph_render.to_utg_js(
            graph, lambda sha: str(request.url_for("get_artifact", sha256=sha))),
            media_type=_MEDIA["utg"])

    # A screen is shared by every run that saw it, and its screenshot is the first run's (with
    # what its user typed): embedded only where the artifact route would serve it too.
    shown = await graph_repo.readable_artifacts(
        conn, [s["screenshot_sha"] for s in graph["screens"] if s.get("screenshot_sha")],
        user.owner_filter)

    def screenshot(sha: str) -> bytes | None:
        path = store.path(sha) if sha in shown else None
        return path.read_bytes() if path else None
    return HTMLResponse(graph_render.to_html(graph, screenshot),
                        headers=SAME_ORIGIN_FRAME_HEADERS)


@router.get("/apps/{package}/graph", responses=GRAPH_RESPONSES)
async def app_graph(package: Package, user: CurrentUser, conn: Conn, settings: SettingsDep,
                    request: Request, format: Format = "json") -> Any:
    """An app's screen graph over all runs: JSON, DOT, Mermaid, an HTML picture, utg.js."""
    screens, edges = await graph_repo.app_graph(conn, package)
    if not screens or not await graph_repo.may_read_app(conn, package, user.owner_filter):
        raise ApiError(404, "app_not_found", f"no screens recorded for {package}")
    return await _render(graphs.graph_json(package, screens, edges), format, request,
                         settings, conn, user)


@router.get("/runs/{run_id}/graph", responses=GRAPH_RESPONSES)
async def run_graph(run: VisibleRun, user: CurrentUser, conn: Conn, settings: SettingsDep,
                    request: Request, format: Format = "json") -> Any:
    """The part of the app's graph one run saw, with edge counts within the run."""
    return await _render(await graphs.run_graph(conn, run), format, request, settings, conn,
                         user)


@router.get("/apps/{package}/coverage")
async def app_coverage(package: Package, user: CurrentUser, conn: Conn) -> dict[str, Any]:
    """Activity coverage, screens, edges, tried and unexplored actions, discovery per run."""
    report = await graph_repo.coverage(conn, package)
    if report["screens"] == 0 or not await graph_repo.may_read_app(conn, package,
                                                                   user.owner_filter):
        raise ApiError(404, "app_not_found", f"no screens recorded for {package}")
    return report


@router.get("/runs/{run_id}/artifacts")
async def run_artifacts(run: VisibleRun, conn: Conn, request: Request,
                        step: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
                        ) -> dict[str, Any]:
    """The screenshots and hierarchies a run stored, with their download URLs."""
    rows = await graph_repo.run_artifacts(conn, run.id, step)
    return {"run_id": str(run.id), "artifacts": [
        {**r, "url": str(request.url_for("get_artifact", sha256=r["sha256"]))} for r in rows]}


@router.get("/artifacts/{sha256}", name="get_artifact", response_class=FileResponse,
            responses=ARTIFACT_RESPONSES)
async def get_artifact(sha256: Annotated[str, Path(pattern="^[0-9a-f]{64}$")],
                       user: CurrentUser, conn: Conn, settings: SettingsDep) -> Response:
    """One stored artifact by its content address."""
    kind = await graph_repo.artifact_kind(conn, sha256)
    path = LocalArtifactStore(settings.artifact_path).path(sha256)
    if kind is None or path is None or not await graph_repo.may_read_artifact(
            conn, sha256, user.owner_filter):
        raise ApiError(404, "artifact_not_found", f"artifact {sha256} not found")
    return FileResponse(path, media_type=kind,
                        headers={"Cache-Control": "private, max-age=31536000, immutable"})

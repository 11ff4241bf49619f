"""The screen graph: one step's write (idempotent under retry) and the reads the API needs.

`record_step` first claims the step's outcome row: a retried step finds it and changes
nothing (visit and edge counts are not counted twice); two concurrent attempts of one step
serialise on that row's key, and the second reads what the first wrote.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import Any
from uuid import UUID

import asyncpg
from pydantic import BaseModel, Field

from waystation.sdk import EventWrite
from waystation.sdk.gates import GATE_PARTS
from waystation.sdk.reads import queries_in
from waystation.sdk.writes import ReadModelWrite

# The kind's own named queries (queries/*.sql beside this module).
sql = queries_in(resources.files(__package__) / "queries")


class ScreenWrite(BaseModel):
    activity: str
    layout_hash: str
    content_hash: str
    phash: int | None = None
    screenshot_sha: str | None = None
    hierarchy_sha: str | None = None
    label: str = ""


class ActionWrite(BaseModel):
    selector: str
    kind: str
    label: str = ""
    row_group: str | None = None
    row_index: int | None = None
    sensitive: bool = False

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.selector}"


class ArtifactWrite(BaseModel):
    kind: str
    sha256: str
    content_type: str
    size_bytes: int


class StepGraphWrite(BaseModel):
    run_id: UUID
    step: int
    app_package: str
    screen: ScreenWrite | None = None  # None when the step ended outside the app
    actions: list[ActionWrite] = Field(default_factory=list)
    from_screen_id: int | None = None
    action_id: int | None = None
    foreign_package: str | None = None
    transitional: bool = False
    artifacts: list[ArtifactWrite] = Field(default_factory=list)


class StepGraphResult(BaseModel):
    screen_id: int | None
    new_screen: bool
    new_edge: bool
    edge_id: int | None = None
    action_ids: dict[str, int] = Field(default_factory=dict)  # ActionWrite.key -> id
    replayed: bool = False


async def record_step(conn: asyncpg.Connection, w: StepGraphWrite) -> StepGraphResult:
    """Apply one step's graph write; call inside the caller's transaction. Two statements:
    the claim (with the artifacts), then the whole graph write."""
    arts = w.artifacts
    claimed = await conn.fetchval(
        sql("claim_step_outcome"), w.run_id, w.step, w.app_package, [a.kind for a in arts],
        [a.sha256 for a in arts], [a.content_type for a in arts], [a.size_bytes for a in arts])
    if claimed is None:
        return await _recorded(conn, w)
    s, acts = w.screen, w.actions
    row = await conn.fetchrow(
        sql("record_claimed_step"), w.run_id, w.step, w.app_package,
        *((s.activity, s.layout_hash, s.content_hash, s.phash, s.screenshot_sha,
           s.hierarchy_sha, s.label) if s is not None else (None,) * 7),
        [a.selector for a in acts], [a.kind for a in acts], [a.label for a in acts],
        [a.row_group for a in acts], [a.row_index for a in acts], [a.sensitive for a in acts],
        w.from_screen_id, w.action_id, w.foreign_package, w.transitional)
    action_ids: dict[str, int] = row["action_ids"]
    if row["screen_id"] is not None and any(a.key not in action_ids for a in acts):
        # Inserted meanwhile by another run's step, after this statement's snapshot.
        action_ids = await _upsert_actions(conn, row["screen_id"], [])
    return StepGraphResult(screen_id=row["screen_id"], new_screen=row["new_screen"],
                           new_edge=row["new_edge"], edge_id=row["edge_id"],
                           action_ids=action_ids)


class OneCallStep(StepGraphWrite):
    """record_mobile_step's argument (migration 085): a step's graph write, with the app's
    declared activities (on a launch), the read-model write that travels with it and the
    event whose output the outcome completes."""

    declared_activities: list[str] | None = None
    write: ReadModelWrite
    done_event: EventWrite


async def record_step_in_one_call(conn: asyncpg.Connection, step: OneCallStep,
                                  screen_phash: Callable[[], int | None],
                                  ) -> StepGraphResult | None:
    """`step` in one round trip and one transaction. None when the step was recorded before:
    then nothing was written, and a retry's path is `record_step`'s. Call outside a
    transaction. A write with gate parts goes the general way (waystation.persistence.writes).

    The screen's perceptual hash (`step.screen.phash` is left empty) is computed by
    `screen_phash` only where the statement finds the screen without one: a new screen, or
    one whose hash a crash between the two statements left out (migration 085). Most steps
    revisit a known screen, and a worker serving several runs is bound by its CPU: computing
    every step's hash while the statement ran cost it 8–18% of its steps (bench_mobile)."""
    assert not step.write.has_gate_parts
    assert step.screen is None or step.screen.phash is None
    # JSON text made by pydantic in one pass, parsed once by the server.
    row = await conn.fetchval(sql("record_mobile_step"), step.model_dump_json(
        exclude={"write": set(GATE_PARTS)}))
    if row is None:
        return None
    if row.get("phash_missing"):
        phash = screen_phash()
        if phash is not None:
            await conn.execute(sql("fill_screen_phash"), row["screen_id"], phash)
    return StepGraphResult(**row)


async def _upsert_actions(conn: asyncpg.Connection, screen_id: int,
                          actions: list[ActionWrite]) -> dict[str, int]:
    if actions:
        await conn.execute(
            sql("insert_actions"), screen_id, [a.selector for a in actions],
            [a.kind for a in actions], [a.label for a in actions],
            [a.row_group for a in actions], [a.row_index for a in actions],
            [a.sensitive for a in actions])
    rows = await conn.fetch(sql("screen_actions"), screen_id)
    return {f"{r['kind']}:{r['selector']}": r["id"] for r in rows}


async def _recorded(conn: asyncpg.Connection, w: StepGraphWrite) -> StepGraphResult:
    """A retried step: the first attempt's outcome, if the device still shows that screen.

    A device action cannot be taken back, so a retry (after a crash, say) may look at another
    screen than the first attempt did. Then the screen it sees is recorded, without a visit
    and without an edge (which action led here is unknown), so the graph stays true.
    """
    row = await conn.fetchrow(sql("get_step_outcome"), w.run_id, w.step)
    screen_id = row["screen_id"]
    if w.screen is None:
        return StepGraphResult(screen_id=None, new_screen=False, new_edge=False, replayed=True)
    s = w.screen
    seen = await conn.fetchval(sql("screen_by_key"), w.app_package, s.activity, s.layout_hash)
    if seen is not None and seen == screen_id:
        return StepGraphResult(screen_id=screen_id, new_screen=row["new_screen"],
                               new_edge=row["new_edge"], edge_id=row["edge_id"],
                               action_ids=await _upsert_actions(conn, screen_id, w.actions),
                               replayed=True)
    new_screen = False
    if seen is None:
        seen = await conn.fetchval(sql("insert_screen_quietly"), w.app_package, s.activity,
                                   s.layout_hash, s.content_hash, s.phash, s.screenshot_sha,
                                   s.hierarchy_sha, s.label, w.run_id, w.step)
        new_screen = seen is not None
        if seen is None:  # inserted concurrently by another run
            seen = await conn.fetchval(sql("screen_by_key"), w.app_package, s.activity,
                                       s.layout_hash)
    return StepGraphResult(screen_id=seen, new_screen=new_screen, new_edge=False,
                           action_ids=await _upsert_actions(conn, seen, w.actions),
                           replayed=True)


async def upsert_app(conn: asyncpg.Connection, package: str, activities: list[str]) -> None:
    await conn.execute(sql("upsert_app"), package, activities)


# --- reads ---------------------------------------------------------------------------------


async def app_graph(conn: asyncpg.Connection, package: str
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    screens = [dict(r) for r in await conn.fetch(sql("app_screens"), package)]
    edges = [dict(r) for r in await conn.fetch(sql("app_edges"), package)]
    return screens, edges


async def run_graph(conn: asyncpg.Connection, run_id: UUID
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    screens = [dict(r) for r in await conn.fetch(sql("run_screens"), run_id)]
    edges = [dict(r) for r in await conn.fetch(sql("run_edges"), run_id)]
    return screens, edges


class StepRecord(BaseModel):
    """A recorded step: the screen it saw (None outside the app or on an error) and the
    action that led there from `from_screen_id`."""

    step: int
    screen_id: int | None
    activity: str | None
    from_screen_id: int | None
    action_id: int | None
    foreign_package: str | None


class ActionRecord(BaseModel):
    id: int
    screen_id: int
    selector: str
    kind: str
    label: str
    row_group: str | None
    row_index: int | None
    sensitive: bool


async def copy_fork_steps(conn: asyncpg.Connection, run_id: UUID, source_run_id: UUID,
                          up_to_step: int) -> tuple[list[StepRecord], list[ActionRecord]]:
    """Give a forked run its source's steps up to `up_to_step`; its steps and their screens'
    actions, as the run now has them."""
    async with conn.transaction():
        await conn.execute(sql("copy_fork_steps"), run_id, source_run_id, up_to_step)
        steps = await conn.fetch(sql("run_steps"), run_id)
        actions = await conn.fetch(sql("run_screen_actions"), run_id)
    return ([StepRecord.model_validate(dict(r)) for r in steps],
            [ActionRecord.model_validate(dict(r)) for r in actions])


async def coverage(conn: asyncpg.Connection, package: str) -> dict[str, Any]:
    app = await conn.fetchrow(sql("get_app"), package)
    screens, edges = await app_graph(conn, package)
    counts = dict(await conn.fetchrow(sql("app_action_counts"), package))
    declared = list(app["declared_activities"]) if app else []
    reached = sorted({s["activity"] for s in screens})
    discovery: dict[str, list[dict[str, int]]] = {}
    for r in await conn.fetch(sql("app_discovery"), package):
        discovery.setdefault(str(r["run_id"]), []).append(
            {"from_step": r["bucket"] * 100, "steps": r["steps"],
             "new_screens": r["new_screens"]})
    return {
        "app_package": package, "declared_activities": declared,
        "reached_activities": reached,
        "activity_coverage": (len(set(reached) & set(declared)) / len(declared)
                              if declared else None),
        "screens": len(screens), "edges": len(edges),
        "effective_edges": sum(1 for e in edges if e["from_screen_id"] != e["to_screen_id"]),
        "actions_discovered": counts["discovered"], "actions_tried": counts["tried"],
        "actions_effective": counts["effective"], "actions_ineffective": counts["ineffective"],
        "unexplored_actions": counts["discovered"] - counts["tried"],
        "frontier_screens": counts["frontier_screens"],
        "new_screens_per_100_steps": discovery,
    }


async def similar_screens(conn: asyncpg.Connection, package: str, phash: int,
                          max_bits: int = 4) -> list[tuple[int, int]]:
    rows = await conn.fetch(sql("similar_screens"), package, phash, max_bits)
    return [(r["id"], r["distance"]) for r in rows]


async def run_artifacts(conn: asyncpg.Connection, run_id: UUID,
                        step: int | None) -> list[dict[str, Any]]:
    return [dict(r) for r in await conn.fetch(sql("list_run_artifacts"), run_id, step)]


async def artifact_kind(conn: asyncpg.Connection, sha256: str) -> str | None:
    return await conn.fetchval(sql("artifact_content_type"), sha256)


async def readable_artifacts(conn: asyncpg.Connection, sha256s: list[str],
                             owner: str | None) -> set[str]:
    """Those of the artifacts that `owner` (None: every owner) may read a run that stored."""
    rows = await conn.fetch(sql("readable_artifacts"), sha256s, owner)
    return {r["sha256"] for r in rows}


async def may_read_artifact(conn: asyncpg.Connection, sha256: str, owner: str | None) -> bool:
    """Whether `owner` (None: every owner) may read a run that stored the artifact."""
    return sha256 in await readable_artifacts(conn, [sha256], owner)


async def may_read_app(conn: asyncpg.Connection, package: str, owner: str | None) -> bool:
    """Whether `owner` (None: every owner) may read a run that explored the app."""
    return bool(await conn.fetchval(sql("may_read_app"), package, owner))


async def run_app_package(conn: asyncpg.Connection, run_id: UUID) -> str | None:
    """A mobile run's app (`mobile_runs`), None for a run without one."""
    package: str | None = await conn.fetchval(sql("run_app_package"), run_id)
    return package


async def archive_sections(conn: asyncpg.Connection,
                           run_ids: list[UUID]) -> dict[UUID, dict[str, Any]]:
    """Per run with graph outcomes: its `graph_outcomes`, as archived."""
    return {r["run_id"]: {"graph_outcomes": json.loads(r["outcomes"])}
            for r in await conn.fetch(sql("archive_graph_outcomes"), run_ids)}


async def forget_artifacts(conn: asyncpg.Connection, sha256s: list[str]) -> None:
    """The app graph's screens stop pointing at artifacts that are deleted."""
    await conn.execute(sql("forget_screen_artifacts"), sha256s)

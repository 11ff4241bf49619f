"""Repository functions for retention and erasure: finding, archiving and deleting whole runs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

import asyncpg

from waystation.contracts.kinds import KindRetention
from waystation.persistence.queries import sql

# Rows deleted per statement from the tables that grow with a run's length: each statement is
# its own short transaction, so live appends never wait long behind a sweep.
CHUNK_ROWS = 5_000


async def runs_to_purge(conn: asyncpg.Connection, *, finished_before: datetime | None,
                        erased_before: datetime | None, limit: int) -> list[tuple[UUID, str]]:
    """(run id, workflow id) of at most `limit` runs due for deletion."""
    rows = await conn.fetch(sql("runs_to_purge"), finished_before, erased_before, limit)
    return [(row["id"], row["workflow_id"]) for row in rows]


async def archive_documents(conn: asyncpg.Connection, run_ids: list[UUID],
                            kinds: Sequence[KindRetention] = ()) -> list[str]:
    """One JSON text per run holding the run and every row of it (the kinds' rows too)."""
    documents = [row["document"] for row in await conn.fetch(sql("archive_runs"), run_ids)]
    sections: dict[str, dict] = {}
    for kind in kinds:
        if kind.archive is not None:
            for run_id, extra in (await kind.archive(conn, run_ids)).items():
                sections.setdefault(str(run_id), {}).update(extra)
    if not sections:
        return documents
    merged = []
    for text in documents:
        document = json.loads(text)
        document.update(sections.get(document["run"]["id"], {}))
        merged.append(json.dumps(document))
    return merged


async def delete_runs(pool: asyncpg.Pool, run_ids: list[UUID],
                      kinds: Sequence[KindRetention] = ()) -> list[str]:
    """Delete the runs with every row of theirs; returns the artifacts no other run saw."""
    while True:
        async with pool.acquire() as conn:
            status = await conn.execute(sql("delete_run_events_chunk"), run_ids, CHUNK_ROWS)
        if int(status.split()[-1]) < CHUNK_ROWS:
            break
    for kind in kinds:
        if kind.purge is not None:
            while True:
                async with pool.acquire() as conn:
                    deleted = await kind.purge(conn, run_ids, CHUNK_ROWS)
                if deleted < CHUNK_ROWS:
                    break
    async with pool.acquire() as conn, conn.transaction():
        seen = [r["sha256"] for r in await conn.fetch(sql("artifacts_of_runs"), run_ids)]
        await conn.execute(sql("delete_runs"), run_ids)
        orphaned = [r["sha"] for r in await conn.fetch(sql("orphaned_artifacts"), seen)]
        for kind in kinds:
            if kind.forget_artifacts is not None:
                await kind.forget_artifacts(conn, orphaned)
    return orphaned


async def open_user_runs(conn: asyncpg.Connection, owner: str) -> list[str]:
    """The workflow ids of `owner`'s visible runs that have not finished."""
    return [row["workflow_id"] for row in await conn.fetch(sql("open_user_runs"), owner)]


async def erase_user_runs(conn: asyncpg.Connection, owner: str) -> int:
    """Hide every run of `owner` from every read; returns how many were hidden now."""
    return await conn.fetchval(sql("erase_user_runs"), owner)

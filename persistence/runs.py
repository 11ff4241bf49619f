"""Repository functions for the `runs` table."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import asyncpg

from waystation.contracts.writes import RunEnd
from waystation.persistence.db import Conflict
from waystation.persistence.models import RunRow
from waystation.persistence.queries import sql

# How `create_run` answered: a new run, the run an idempotency key already made, or the
# group's run of that kind and name already in progress.
CreateOutcome = Literal["created", "replayed", "in_progress"]
# The in-progress run a name conflicted with may end before it is read; the insert is then
# tried again (the name is free), a few times at most.
NAMED_INSERT_ATTEMPTS = 3
# A kind's run filter's one parameter (the registry refuses any other).
KIND_PARAMETER = re.compile(r"\$1\b")


class RunIdTaken(Conflict):
    """The run id a caller chose is already a run's (whose, the caller may not see)."""


async def create_run(
    conn: asyncpg.Connection, *, run_id: UUID, kind: str, owner: str, group_id: UUID | None,
    workflow_id: str, idempotency_key: str | None, input: dict[str, Any],
    project_id: str | None = None, gate_policies: dict[str, Any] | None = None,
    name: str | None = None, forked_from: dict[str, Any] | None = None,
) -> tuple[RunRow, CreateOutcome]:
    """Insert a run; returns (run, outcome). A repeated idempotency key returns the first run;
    a `name` the group's runs of that kind have in progress returns that run; RunIdTaken when
    `run_id` (chosen by a caller) is another run's."""
    for _ in range(NAMED_INSERT_ATTEMPTS):
        record = await conn.fetchrow(sql("insert_run"), run_id, kind, owner, group_id,
                                     workflow_id, idempotency_key, input, project_id,
                                     gate_policies, name, forked_from)
        if record is not None:
            return RunRow.from_record(record), "created"
        if idempotency_key is not None:
            keyed = await conn.fetchrow(sql("find_run_by_key"), owner, idempotency_key)
            if keyed is not None:
                return RunRow.from_record(keyed), "replayed"
        if name is not None:
            named = await conn.fetchrow(sql("find_named_run_in_progress"), group_id, kind, name)
            if named is not None:
                return RunRow.from_record(named), "in_progress"
            continue  # the named run ended before it was read: the name is free now
        # Neither key nor name conflicted: the id did, a run the caller may not even see
        # (row-level security), so it is told only that the id is taken.
        raise RunIdTaken(f"run id {run_id} is taken")
    raise RuntimeError(f"run {run_id} conflicted {NAMED_INSERT_ATTEMPTS} times with a named "
                       "run that was gone when read")


async def get_run(conn: asyncpg.Connection, run_id: UUID) -> RunRow | None:
    record = await conn.fetchrow(sql("get_run"), run_id)
    return RunRow.from_record(record) if record else None


async def get_run_or_hidden(conn: asyncpg.Connection, run_id: UUID) -> RunRow | None:
    """A run, visible or hidden by a person; one an erasure hid is None, as a deleted one."""
    record = await conn.fetchrow(sql("get_run_or_hidden"), run_id)
    return RunRow.from_record(record) if record else None


async def hide_run(conn: asyncpg.Connection, run_id: UUID, by: str) -> datetime | None:
    """Hide the run; when it was hidden (the first time), or None if an erasure hid it."""
    return await conn.fetchval(sql("hide_run"), run_id, by)


async def restore_run(conn: asyncpg.Connection, run_id: UUID, *,
                      within_seconds: float) -> RunRow | None:
    """Show a run a person hid again, if hidden less than `within_seconds` ago."""
    record = await conn.fetchrow(sql("restore_run"), run_id, within_seconds)
    return RunRow.from_record(record) if record else None


async def run_end(conn: asyncpg.Connection, run_id: UUID) -> RunEnd | None:
    record = await conn.fetchrow(sql("run_end"), run_id)
    return RunEnd(**dict(record)) if record else None


async def list_runs(
    conn: asyncpg.Connection, *, owner: str | None, kind: str | None, status: str | None,
    awaiting_human: bool | None, limit: int, before: tuple[datetime, UUID] | None,
    project_id: str | None = None, search: str | None = None, group_id: UUID | None = None,
    stale_after: int | None = None, hidden: bool = False,
    kind_filters: Sequence[tuple[str, str]] = (),
) -> list[RunRow]:
    """A page of runs; `kind_filters` are (a kind's query of the run ids a value keeps, with
    the value as `$1`: `RunListFilter.runs`, the value), each a condition on `runs.id`."""
    created_at, run_id = before if before else (None, None)
    first = 13  # the first parameter after list_runs' own
    conditions = "".join(
        f" AND id IN ({KIND_PARAMETER.sub(f'${first + i}', query.strip().rstrip(';'))})"
        for i, (query, _) in enumerate(kind_filters))
    records = await conn.fetch(sql("list_runs").replace("/* KIND_FILTERS */", conditions),
                               owner, kind, status, awaiting_human, limit, created_at, run_id,
                               project_id, search, group_id, stale_after, hidden,
                               *(value for _, value in kind_filters))
    return [RunRow.from_record(r) for r in records]


async def list_tasks(conn: asyncpg.Connection, *, owner: str | None, status: str | None,
                     limit: int, before: tuple[datetime, UUID] | None) -> list[RunRow]:
    updated_at, run_id = before if before else (None, None)
    records = await conn.fetch(sql("list_tasks"), owner, status, limit, updated_at, run_id)
    return [RunRow.from_record(r) for r in records]


async def count_tasks(conn: asyncpg.Connection, *, owner: str | None, state: str | None,
                      message_kinds: list[str]) -> int:
    count: int = await conn.fetchval(sql("count_tasks"), owner, state, message_kinds)
    return count


async def mark_failed_to_start(conn: asyncpg.Connection, run_id: UUID, reason: str) -> None:
    await conn.execute(sql("mark_run_failed_to_start"), run_id, reason)

"""A progress write updates its run's row once (migration 091, issue 39): its state and its
`last_seq` in one UPDATE, one new version of the row, where the state and then the events'
`last_seq` made two. Counted around the write by its transaction's own statistics
(`pg_stat_xact_user_tables.n_tup_upd`: one per row version an UPDATE makes). The write's
guarantees stay: a retried write answers the same seqs and appends nothing, a finished run's
state does not move while its events still number on, the status change's notice comes
before the events', and writers of one run at once number their events without a gap."""

from __future__ import annotations

import asyncio
import json
from uuid import UUID

import asyncpg

from tests.helpers import new_validation_run
from waystation.persistence.events import append_events
from waystation.persistence.writes import (
    EventWrite,
    ReadModelWrite,
    RunStateWrite,
    SnapshotWrite,
    apply_write,
)

VERSIONS = "SELECT n_tup_upd FROM pg_stat_xact_user_tables WHERE relid = 'runs'::regclass"


def _events(*keys: str) -> list[EventWrite]:
    return [EventWrite(event_key=k, type="task.completed", phase=1, status="completed")
            for k in keys]


async def _applied(conn: asyncpg.Connection, write: ReadModelWrite) -> tuple[dict[str, int], int]:
    """The write's seqs, and how many versions of `runs` rows it made (read before and after it
    in its transaction: the counts also hold earlier transactions' not yet flushed)."""
    async with conn.transaction():
        before = await conn.fetchval(VERSIONS)
        seqs = await apply_write(conn, write)
        return seqs, await conn.fetchval(VERSIONS) - before


async def _row(conn: asyncpg.Connection, run_id: UUID) -> asyncpg.Record:
    return await conn.fetchrow("SELECT status, current_phase, phase_name, last_seq, "
                               "(SELECT count(*) FROM run_events WHERE run_id = $1) AS events "
                               "FROM runs WHERE id = $1", run_id)


async def test_a_write_with_state_and_events_makes_one_version_of_the_run_row(
        pool: asyncpg.Pool) -> None:
    run_id = (await new_validation_run(pool)).run_id
    step = ReadModelWrite(
        run_id=run_id, run=RunStateWrite(status="running", current_phase=1, phase_name="Build"),
        events=_events("p1.a", "p1.b"),
        snapshots=[SnapshotWrite(step_ordinal=1, label="p1", phase=1, state={"p": 1})])
    async with pool.acquire() as conn:
        assert await _applied(conn, step) == ({"p1.a": 1, "p1.b": 2}, 1)
        row = await _row(conn, run_id)
        assert (row["status"], row["current_phase"], row["phase_name"], row["last_seq"],
                row["events"]) == ("running", 1, "Build", 2, 2)
        # Retried: the same seqs, nothing appended; the state written again is the one version.
        assert await _applied(conn, step) == ({"p1.a": 1, "p1.b": 2}, 1)
        assert (await _row(conn, run_id))["last_seq"] == 2
        # A key met again beside a new one: the old keeps its seq, the new one is next.
        assert await _applied(conn, step.model_copy(update={
            "events": _events("p1.b", "p1.c"),
            "run": RunStateWrite(status="running", current_phase=2)})) == (
            {"p1.b": 2, "p1.c": 3}, 1)
        row = await _row(conn, run_id)
        assert (row["current_phase"], row["last_seq"], row["events"]) == (2, 3, 3)


async def test_events_alone_or_state_alone_make_one_version_and_a_retry_none(
        pool: asyncpg.Pool) -> None:
    run_id = (await new_validation_run(pool)).run_id
    events = ReadModelWrite(run_id=run_id, events=_events("a"))
    state = ReadModelWrite(run_id=run_id, run=RunStateWrite(status="running", current_phase=1))
    async with pool.acquire() as conn:
        assert await _applied(conn, events) == ({"a": 1}, 1)
        assert await _applied(conn, events) == ({"a": 1}, 0)
        assert await _applied(conn, state) == ({}, 1)
        assert (await _row(conn, run_id))["status"] == "running"


async def test_a_finished_run_keeps_its_state_while_its_events_number_on(
        pool: asyncpg.Pool) -> None:
    run_id = (await new_validation_run(pool)).run_id
    async with pool.acquire() as conn:
        ended = ReadModelWrite(
            run_id=run_id, run=RunStateWrite(status="completed", current_phase=5),
            events=_events("run.completed"))
        assert await _applied(conn, ended) == ({"run.completed": 1}, 1)
        assert await _applied(conn, ended) == ({}, 0)  # ended already: nothing at all
        # A late write with a state that is not an end: its events land, its state does not.
        late = ReadModelWrite(run_id=run_id, run=RunStateWrite(status="running", current_phase=6),
                              events=_events("late"))
        assert await _applied(conn, late) == ({"late": 2}, 1)
        row = await _row(conn, run_id)
        assert (row["status"], row["current_phase"], row["last_seq"]) == ("completed", 5, 2)
        assert await append_events(conn, run_id, _events("later")) == {"later": 3}


async def test_the_status_notice_comes_before_the_events_notice(pool: asyncpg.Pool) -> None:
    run_id = (await new_validation_run(pool)).run_id
    heard: asyncio.Queue[tuple[str, dict]] = asyncio.Queue()

    def note(_conn: object, _pid: int, channel: str, payload: str) -> None:
        heard.put_nowait((channel, json.loads(payload)))

    async with pool.acquire() as listener, pool.acquire() as conn:
        for channel in ("waystation_status", "waystation_events"):
            await listener.add_listener(channel, note)
        try:
            await apply_write(conn, ReadModelWrite(
                run_id=run_id, run=RunStateWrite(status="running", current_phase=1),
                events=_events("p1.a", "p1.b")))
            # Other runs may notify meanwhile: this run's two notices, in the order heard.
            mine: list[tuple[str, dict]] = []
            while len(mine) < 2:
                channel, payload = await asyncio.wait_for(heard.get(), timeout=5)
                if payload.get("run_id") == str(run_id):
                    mine.append((channel, payload))
        finally:
            for channel in ("waystation_status", "waystation_events"):
                await listener.remove_listener(channel, note)
    assert [c for c, _ in mine] == ["waystation_status", "waystation_events"]
    assert mine[0][1]["status"] == "running"
    events = mine[1][1]
    assert (events["first"], events["seq"]) == (1, 2)
    assert [e["seq"] for e in events["events"]] == [1, 2]


async def test_writers_of_one_run_at_once_with_snapshots_and_state_number_without_a_gap(
        pool: asyncpg.Pool) -> None:
    """Two recorder-like writers (a snapshot, the state, events: a snapshot's row locks the
    run's key before the write locks the row) and a bare appender, at once: no deadlock, and
    every event once, numbered 1..n."""
    run_id = (await new_validation_run(pool)).run_id
    writes = 60

    async def recorder(name: str, first_ordinal: int) -> None:
        for i in range(writes):
            write = ReadModelWrite(
                run_id=run_id, run=RunStateWrite(status="running", current_phase=i % 5),
                events=_events(f"{name}:{i}:a", f"{name}:{i}:b"),
                snapshots=[SnapshotWrite(step_ordinal=first_ordinal + i, label=name,
                                         state={"i": i})])
            async with pool.acquire() as conn:
                await apply_write(conn, write)

    async def appender() -> None:
        for i in range(writes):
            async with pool.acquire() as conn:
                await append_events(conn, run_id, _events(f"bare:{i}"))

    await asyncio.gather(recorder("one", 0), recorder("two", writes), appender())
    async with pool.acquire() as conn:
        seqs = [r["seq"] for r in await conn.fetch(
            "SELECT seq FROM run_events WHERE run_id = $1 ORDER BY seq", run_id)]
        row = await _row(conn, run_id)
    assert seqs == list(range(1, 5 * writes + 1))
    assert row["last_seq"] == row["events"] == 5 * writes


def _metered(key: str, cost: str, tokens: int) -> EventWrite:
    return EventWrite(event_key=key, type="task.completed", phase=1, status="completed",
                      output={"result": {}, "usage": {"cost_usd": cost, "input_tokens": tokens,
                                                      "output_tokens": 2 * tokens}})


async def test_a_writes_usage_joins_the_one_update_and_counts_once(pool: asyncpg.Pool) -> None:
    """Migration 091: the usage of the events a write inserts is added to the run's costs in
    the row's one UPDATE (a trigger made one more version an event); a retry adds nothing."""
    run_id = (await new_validation_run(pool)).run_id
    costs = "SELECT cost_usd::text, input_tokens, output_tokens FROM runs WHERE id = $1"
    write = ReadModelWrite(run_id=run_id, run=RunStateWrite(status="running", current_phase=1),
                           events=[_metered("t1", "0.25", 10), _metered("t2", "0.5", 5),
                                   *_events("plain")])
    async with pool.acquire() as conn:
        assert await _applied(conn, write) == ({"t1": 1, "t2": 2, "plain": 3}, 1)
        assert tuple(await conn.fetchrow(costs, run_id)) == ("0.750000000", 15, 30)
        assert await _applied(conn, write) == ({"t1": 1, "t2": 2, "plain": 3}, 1)
        assert tuple(await conn.fetchrow(costs, run_id)) == ("0.750000000", 15, 30)
        # Events alone, on a run that has ended: its totals still follow them.
        await apply_write(conn, ReadModelWrite(
            run_id=run_id, run=RunStateWrite(status="failed", current_phase=1)))
        assert await append_events(conn, run_id, [_metered("late", "0.125", 1)]) == {"late": 4}
        assert tuple(await conn.fetchrow(costs, run_id)) == ("0.875000000", 16, 32)

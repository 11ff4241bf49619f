"""Graph writes are idempotent under retry, and concurrent retries of a step serialise."""

from __future__ import annotations

import asyncio
import json

import asyncpg

from tests.mobile_helpers import new_mobile_run
from waystation.contracts.writes import EventWrite, ReadModelWrite, RunStateWrite, SnapshotWrite
from waystation.kinds.mobile import repository as graph
from waystation.persistence.events import append_events

PKG = "com.example.retry"


def _write(run_id, step: int, layout: str, *, from_screen=None, action=None):
    return graph.StepGraphWrite(
        run_id=run_id, step=step, app_package=PKG,
        screen=graph.ScreenWrite(activity=".Main", layout_hash=layout, content_hash="c",
                                 phash=-5, label="Main"),
        actions=[graph.ActionWrite(selector="Button#go", kind="tap", label="Go"),
                 graph.ActionWrite(selector="back", kind="back", label="back")],
        from_screen_id=from_screen, action_id=action,
        artifacts=[graph.ArtifactWrite(kind="screenshot", sha256="a" * 64,
                                       content_type="image/png", size_bytes=3)])


async def _record(pool: asyncpg.Pool, write: graph.StepGraphWrite) -> graph.StepGraphResult:
    async with pool.acquire() as conn, conn.transaction():
        return await graph.record_step(conn, write)


async def test_retried_steps_write_once(pool):
    arg = await new_mobile_run(pool, app_package=PKG)
    first = await _record(pool, _write(arg.run_id, 1, "L1"))
    assert first.new_screen and not first.replayed
    go = first.action_ids["tap:Button#go"]
    second = _write(arg.run_id, 2, "L2", from_screen=first.screen_id, action=go)
    # The same step three times, two of them at once: one outcome, one visit, one edge.
    results = [await _record(pool, second)]
    results += await asyncio.gather(_record(pool, second), _record(pool, second))
    assert sum(not r.replayed for r in results) == 1
    assert all(r.screen_id == results[0].screen_id and r.new_screen and r.new_edge
               for r in results)
    assert results[1].action_ids == results[0].action_ids
    async with pool.acquire() as conn:
        visits = await conn.fetchval("SELECT sum(visit_count) FROM screens WHERE app_package=$1",
                                     PKG)
        edges = await conn.fetch("SELECT count FROM edges WHERE app_package = $1", PKG)
        outcomes = await conn.fetchval("SELECT count(*) FROM graph_persistence_outcomes "
                                       "WHERE run_id = $1", arg.run_id)
        artifacts = await conn.fetchval("SELECT count(*) FROM run_artifacts WHERE run_id = $1",
                                        arg.run_id)
        similar = await graph.similar_screens(conn, PKG, -5)
    assert visits == 2 and [e["count"] for e in edges] == [1] and outcomes == 2
    assert artifacts == 2 and len(similar) == 2 and similar[0][1] == 0


async def test_graph_accumulates_across_runs(pool):
    a = await new_mobile_run(pool, app_package=PKG)
    b = await new_mobile_run(pool, app_package=PKG)
    first = await _record(pool, _write(a.run_id, 1, "X1"))
    again = await _record(pool, _write(b.run_id, 1, "X1"))
    assert first.screen_id == again.screen_id and first.new_screen and not again.new_screen
    async with pool.acquire() as conn:
        run_screens, _ = await graph.run_graph(conn, b.run_id)
    assert [s["id"] for s in run_screens] == [first.screen_id]


async def test_retry_that_sees_another_screen_records_it_without_an_edge(pool):
    arg = await new_mobile_run(pool, app_package=PKG)
    first = await _record(pool, _write(arg.run_id, 1, "R1"))
    go = first.action_ids["tap:Button#go"]
    await _record(pool, _write(arg.run_id, 2, "R2", from_screen=first.screen_id, action=go))
    # The worker died after step 2's first attempt; the device now shows another screen.
    retry = await _record(pool, _write(arg.run_id, 2, "R3", from_screen=first.screen_id,
                                       action=go))
    assert retry.replayed and retry.new_screen and not retry.new_edge
    assert "tap:Button#go" in retry.action_ids
    async with pool.acquire() as conn:
        edges = await conn.fetch("SELECT to_screen_id FROM edges WHERE from_screen_id = $1",
                                 first.screen_id)
        visits = await conn.fetchval("SELECT visit_count FROM screens WHERE id = $1",
                                     retry.screen_id)
    assert [e["to_screen_id"] for e in edges] != [retry.screen_id] and visits == 1


async def test_one_statement_step_returns_known_and_new_actions_and_steps_outside(pool):
    """The graph write is one statement, which cannot see the actions it inserts: the ids it
    returns are the stored ones for known actions and the new ones for the rest."""
    arg = await new_mobile_run(pool, app_package=PKG)
    first = await _record(pool, _write(arg.run_id, 1, "K1"))
    grown = _write(arg.run_id, 2, "K1")
    grown.actions.append(graph.ActionWrite(selector="Button#new", kind="tap", label="New"))
    again = await _record(pool, grown)
    assert again.screen_id == first.screen_id and not again.new_screen
    assert {k: again.action_ids[k] for k in first.action_ids} == first.action_ids
    outside = await _record(pool, graph.StepGraphWrite(
        run_id=arg.run_id, step=3, app_package=PKG, foreign_package="com.android.chrome"))
    assert outside.screen_id is None and not outside.new_screen and not outside.new_edge
    async with pool.acquire() as conn:
        stored = {f"{r['kind']}:{r['selector']}": r["id"] for r in await conn.fetch(
            "SELECT id, kind, selector FROM actions WHERE screen_id = $1", first.screen_id)}
        outcome = await conn.fetchrow("SELECT * FROM graph_persistence_outcomes "
                                      "WHERE run_id = $1 AND step = 3", arg.run_id)
    assert again.action_ids == stored and len(stored) == 3
    assert outcome["foreign_package"] == "com.android.chrome" and outcome["screen_id"] is None


async def test_one_call_step_writes_what_the_transaction_path_writes_once(pool):
    """record_mobile_step (migration 027): graph, artifacts, app, run state, snapshot and
    events in one call; called again (a retry) it writes nothing and leaves the retry path."""
    arg = await new_mobile_run(pool, app_package=PKG)
    first = await _record(pool, _write(arg.run_id, 1, "O1"))
    go = first.action_ids["tap:Button#go"]
    step = _write(arg.run_id, 2, "O2", from_screen=first.screen_id, action=go)
    assert step.screen is not None
    step.screen.phash = None  # the call computes it where the screen has none
    write = ReadModelWrite(
        run_id=arg.run_id, run=RunStateWrite(status="running", current_phase=0),
        snapshots=[SnapshotWrite(step_ordinal=1, label="step 1", phase=1, state={"step": 1})],
        events=[EventWrite(event_key="s1.choose", type="agent.node.completed"),
                EventWrite(event_key="s2.act", type="agent.node.completed")])
    done = EventWrite(event_key="s2.persist", type="agent.node.completed",
                      output={"step": 2})
    call = graph.OneCallStep(**dict(step), declared_activities=[".Main", ".B"], write=write,
                             done_event=done)
    async with pool.acquire() as conn:
        result = await graph.record_step_in_one_call(conn, call, lambda: -7)
        assert result is not None and result.new_screen and result.new_edge
        phash = await conn.fetchval("SELECT phash FROM screens WHERE id = $1", result.screen_id)
        assert set(result.action_ids) == {"tap:Button#go", "back:back"}
        retry = call.model_copy(update={"declared_activities": None})
        assert await graph.record_step_in_one_call(conn, retry, lambda: -7) is None
        events = await conn.fetch("SELECT event_key, output FROM run_events WHERE run_id = $1 "
                                  "ORDER BY seq", arg.run_id)
        run = await conn.fetchrow("SELECT status FROM runs WHERE id = $1", arg.run_id)
        snapshots = await conn.fetchval("SELECT count(*) FROM run_snapshots WHERE run_id = $1",
                                        arg.run_id)
        edges = await conn.fetch("SELECT count FROM edges WHERE from_screen_id = $1",
                                 first.screen_id)
        outcome = await conn.fetchrow("SELECT * FROM graph_persistence_outcomes "
                                      "WHERE run_id = $1 AND step = 2", arg.run_id)
        app = await graph.coverage(conn, PKG)
    assert [e["event_key"] for e in events] == ["s1.choose", "s2.act", "s2.persist"]
    assert events[-1]["output"] == {"step": 2, "screen_id": result.screen_id,
                                    "new_screen": True, "new_edge": True}
    assert run["status"] == "running" and snapshots == 1 and [e["count"] for e in edges] == [1]
    assert outcome["screen_id"] == result.screen_id and outcome["edge_id"] == result.edge_id
    assert app["declared_activities"] == [".Main", ".B"] and phash == -7
    # The retry path finds the same outcome.
    again = await _record(pool, step)
    assert again.replayed and again.screen_id == result.screen_id and again.new_edge


async def test_one_call_hashes_and_stores_a_screens_hash_only_where_it_is_missing(pool):
    """The hash is computed and stored for a new screen, and for a visit to a screen whose hash
    is missing (a crash between the two statements); a visit to a screen that has one neither
    computes it (the worker's CPU) nor changes it."""
    arg = await new_mobile_run(pool, app_package=PKG)
    read_model = ReadModelWrite(run_id=arg.run_id)
    computed: list[int] = []

    async def visit(step: int, phash: int) -> graph.StepGraphResult:
        write = _write(arg.run_id, step, "H1")
        assert write.screen is not None
        write.screen.phash = None
        call = graph.OneCallStep(**dict(write), write=read_model, done_event=EventWrite(
            event_key=f"s{step}.persist", type="agent.node.completed", output={}))

        def screen_phash() -> int:
            computed.append(step)
            return phash

        async with pool.acquire() as conn:
            result = await graph.record_step_in_one_call(conn, call, screen_phash)
            assert result is not None
            stored = await conn.fetchval("SELECT phash FROM screens WHERE id = $1",
                                         result.screen_id)
        assert stored == (phash if step != 3 else 11)
        return result

    first = await visit(1, 11)
    async with pool.acquire() as conn:
        await conn.execute("UPDATE screens SET phash = NULL WHERE id = $1", first.screen_id)
    assert not (await visit(2, 11)).new_screen  # filled on the next visit
    await visit(3, 99)  # the stored hash stays, and is not computed again
    assert computed == [1, 2]


async def test_events_appended_once_per_key_within_and_across_calls(pool):
    arg = await new_mobile_run(pool, app_package=PKG)
    async with pool.acquire() as conn:
        seqs = await append_events(conn, arg.run_id, [
            EventWrite(event_key="a", type="t"), EventWrite(event_key="b", type="t"),
            EventWrite(event_key="a", type="t")])
        later = await append_events(conn, arg.run_id, [
            EventWrite(event_key="b", type="t"), EventWrite(event_key="c", type="t")])
        count = await conn.fetchval("SELECT count(*) FROM run_events WHERE run_id = $1",
                                    arg.run_id)
    assert seqs == {"a": 1, "b": 2} and later == {"b": 2, "c": 3} and count == 3


async def test_one_calls_new_events_are_one_notification_in_seq_order(pool, migrated_url):
    """append_run_events (migration 029): the new events of a call, a key's first occurrence
    only and none already stored, numbered in the order given and announced together."""
    arg = await new_mobile_run(pool, app_package=PKG)
    heard: asyncio.Queue[dict] = asyncio.Queue()
    listener = await asyncpg.connect(migrated_url)
    await listener.add_listener(
        "waystation_events", lambda *note: heard.put_nowait(json.loads(str(note[-1]))))
    try:
        async with pool.acquire() as conn:
            await append_events(conn, arg.run_id, [EventWrite(event_key="a", type="t")])
            seqs = await append_events(conn, arg.run_id, [
                EventWrite(event_key="c", type="t", output={"n": 1}),
                EventWrite(event_key="a", type="t"), EventWrite(event_key="b", type="t"),
                EventWrite(event_key="c", type="u")])
            last_seq = await conn.fetchval("SELECT last_seq FROM runs WHERE id = $1",
                                           arg.run_id)
        notes = [await asyncio.wait_for(heard.get(), 5) for _ in range(2)]
    finally:
        await listener.close()
    assert seqs == {"c": 2, "a": 1, "b": 3} and last_seq == 3
    assert (notes[1]["first"], notes[1]["seq"]) == (2, 3)
    assert [(e["seq"], e["type"], e.get("output")) for e in notes[1]["events"]] == [
        (2, "t", {"n": 1}), (3, "t", None)]


async def test_only_the_worker_role_may_record_a_step_in_one_call(pool):
    async with pool.acquire() as conn:
        for function in ("record_mobile_step(jsonb)", "record_mobile_step_needing_hash(jsonb)"):
            assert await conn.fetchval(
                "SELECT has_function_privilege('waystation_worker', $1, 'EXECUTE')", function)
            assert not await conn.fetchval(
                "SELECT has_function_privilege('waystation_api', $1, 'EXECUTE')", function)

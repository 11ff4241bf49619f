"""One AG-UI run's stream (api/protocols/ag_ui/stream.py) against the real Postgres and event
hub, with a write committed at the worst moment: between the stream's read of the run and its
read of the run's requests, as a worker under load can."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg

from waystation.api.auth import User
from waystation.api.event_hub import EventHub
from waystation.api.protocols.ag_ui.mapping import Position
from waystation.api.protocols.ag_ui.stream import ThreadStream
from waystation.api.services import decisions as decisions_service
from waystation.contracts.writes import GateOption
from waystation.persistence.claims import Claims
from waystation.persistence.runs import create_run, get_run
from waystation.persistence.writes import (
    EventWrite,
    GateOpenWrite,
    ReadModelWrite,
    RunStateWrite,
    SnapshotWrite,
    apply_write,
)
from waystation.registry import load_registry

OWNER = "ana"


async def _running_run(pool: asyncpg.Pool) -> uuid.UUID:
    run_id = uuid.uuid4()
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind="validation", owner=OWNER, group_id=None,
                         workflow_id=f"validation-{run_id}", idempotency_key=None, input={})
        await apply_write(conn, ReadModelWrite(
            run_id=run_id, run=RunStateWrite(status="running", current_phase=0),
            events=[EventWrite(event_key="run.started", type="run.started"),
                    EventWrite(event_key="p0.started", type="phase.started", phase=0)]))
    return run_id


def _gate_write(run_id: uuid.UUID, gate_id: uuid.UUID) -> ReadModelWrite:
    """A phase's end and its gate, as the recorder writes them: one transaction."""
    return ReadModelWrite(
        run_id=run_id, run=RunStateWrite(status="paused", current_phase=0, hitl_state="review"),
        snapshots=[SnapshotWrite(step_ordinal=1, label="gate review", phase=0,
                                 state={"brief": "ok"})],
        events=[EventWrite(event_key="p0.completed", type="phase.completed", phase=0),
                EventWrite(event_key="gate.opened", type="gate.opened", phase=0)],
        open_gate=GateOpenWrite(
            id=gate_id, checkpoint_name="review", phase=0, title="Review the brief",
            description="Read it, then decide.", digest="0" * 64,
            options=[GateOption(value=o, label=o, description=o)
                     for o in ("approve", "reject")]))


async def _frames(stream: ThreadStream, hub: EventHub) -> list[dict[str, Any]]:
    events = []
    async for chunk in stream.frames(hub, heartbeat=30.0):
        events += [json.loads(line[6:]) for line in chunk.decode().splitlines()
                   if line.startswith("data: ")]
        if events and events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR"):
            return events
    return events


async def test_a_gate_opened_while_the_stream_looks_at_the_run_is_sent_before_its_interrupt(
        pool, migrated_url, monkeypatch):
    """The stream has sent every event and reads the run (nothing more to send), then its
    requests; the gate's write (its events, its snapshot and the request) commits in between.
    The interrupt must not go out before the gate's events and state."""
    run_id = await _running_run(pool)
    read_requests = decisions_service.run_decisions
    gate_written: list[uuid.UUID] = []

    async def gate_opens_first(conn: asyncpg.Connection, run: Any) -> Any:
        if not gate_written:
            gate_written.append(uuid.uuid4())
            async with pool.acquire() as other:
                await apply_write(other, _gate_write(run_id, gate_written[0]))
        return await read_requests(conn, run)

    monkeypatch.setattr(decisions_service, "run_decisions", gate_opens_first)
    hub = EventHub(pool, lambda: asyncpg.connect(migrated_url))
    await hub.start()
    try:
        async with pool.acquire() as conn:
            run = await get_run(conn, run_id)
        assert run is not None
        stream = ThreadStream(
            pool=pool, claims=Claims(user=OWNER), user=User(name=OWNER),
            registry=load_registry(), run=run, thread_id=str(run_id), run_id="ag-ui-run",
            position=Position(0), may_still_read=_always)
        events = await _frames(stream, hub)
    finally:
        await hub.stop()

    assert gate_written, "the write went in between the two reads"
    names = [e.get("name", e["type"]) for e in events]
    assert names.index("waystation.gate.opened") < names.index("RUN_FINISHED"), names
    states = [e for e in events if e["type"] == "STATE_SNAPSHOT"]
    assert [s["snapshot"] for s in states] == [{"brief": "ok"}]
    [interrupt] = events[-1]["outcome"]["interrupts"]
    assert interrupt["id"] == str(gate_written[0])


async def _always() -> bool:
    return True

"""The toy in DBOS Transact (run by bench.bench_peers): a workflow of five steps, each
writing one progress event (DBOS checkpoints each step's output: the snapshot); the gated run
waits in `recv` after step 2 until the benchmark `send`s the approval."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
from dbos import DBOS

from bench.peers_common import (
    APPROVE_AFTER,
    EVENTS_TABLE,
    HUMAN_PAUSE_S,
    INSERT_EVENT,
    PHASES,
    Figures,
    Plan,
    harness_main,
    measure_toy,
    new_run_id,
    next_step_ms,
    wait_for_row,
)

STEP_TIMES = "SELECT created_at FROM peer_events WHERE run_id = $1 ORDER BY step"
_pool: asyncpg.Pool | None = None


@DBOS.step()
async def toy_step(run_id: str, number: int) -> dict[str, int]:
    assert _pool is not None
    await _pool.execute(INSERT_EVENT, run_id, number)
    return {"phase": number}


@DBOS.workflow()
async def toy(run_id: str, gated: bool) -> int:
    for number in range(1, PHASES + 1):
        await toy_step(run_id, number)
        if gated and number == APPROVE_AFTER:
            await DBOS.recv_async("approve", timeout_seconds=600)
    return PHASES


async def measure(plan: Plan) -> list[Figures]:
    global _pool
    conn = await asyncpg.connect(plan.database_url)
    await conn.execute(EVENTS_TABLE)
    _pool = await asyncpg.create_pool(plan.database_url, min_size=1,
                                      max_size=plan.concurrency + 5)
    system_url = await _system_database(conn, plan.database_url)
    DBOS(config={"name": "waystation-peers", "system_database_url": system_url})
    DBOS.launch()
    try:
        async def run_straight() -> str:
            run_id = new_run_id()
            handle: Any = await DBOS.start_workflow_async(toy, run_id, False)
            await handle.get_result()
            return run_id

        async def approve_one() -> float:
            run_id = new_run_id()
            handle = await DBOS.start_workflow_async(toy, run_id, True)
            await wait_for_row(conn, "SELECT 1 FROM peer_events WHERE run_id = $1 AND step = $2",
                               run_id, APPROVE_AFTER)
            await asyncio.sleep(HUMAN_PAUSE_S)  # let it reach recv
            sent = time.time()
            await DBOS.send_async(handle.workflow_id, "approve", "approve")
            latency = await next_step_ms(conn, run_id, sent)
            await handle.get_result()
            return latency

        result = await measure_toy("DBOS Transact", plan, conn, STEP_TIMES,
                                   run_straight=run_straight, approve_one=approve_one)
    finally:
        DBOS.destroy()
        await _pool.close()
        await conn.close()
    return [result]


async def _system_database(conn: asyncpg.Connection, url: str) -> str:
    """DBOS keeps its checkpoints in a system database of its own on the same server."""
    name = f"dbos_sys_{new_run_id().replace('-', '')[:10]}"
    await conn.execute(f'CREATE DATABASE "{name}"')
    head, sep, query = url.partition("?")
    return f"{head.rpartition('/')[0]}/{name}{sep}{query}"


if __name__ == "__main__":
    harness_main(measure)
